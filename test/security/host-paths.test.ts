// /proc/1/cmdline inside showed host paths of the data directory (bwrap's
// own argv: the workspace, the prepared /etc, state directories), readable by every process of the
// sandbox. Now bwrap reads its options from a file descriptor (`--args FD`): its command line is only
// `bwrap --args 5 -- <command>`, and its environment is empty.
import { describe, expect, it } from 'vitest';
import { useSandbox } from '../helpers/security-control.js';

describe('no host path inside the sandbox', () => {
  const sandbox = useSandbox();

  it('/proc/1/cmdline and every process argv and environ hold no host path', async () => {
    const { dirs } = sandbox();
    const r = await sandbox().run(
      'for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do tr "\\0" "\\n" < $f 2>/dev/null; done; echo; tr "\\0" " " < /proc/1/cmdline',
    );
    expect(r.out).not.toContain(dirs.root);
    expect(r.out).not.toContain(dirs.dataDir);
    expect(r.out).not.toMatch(/\/run\/agentfense|bwrap-etc-/);
    // pid 1 is bwrap with its options in a descriptor, or (execLauncher) af-init with its connection's fd.
    expect(r.out.trim().split('\n').at(-1)).toMatch(
      /^(\S*bwrap --args \d+ -- \/bin\/sh -c |\/\.agentfense\/af-init --fd \d+$)/,
    );
  });
});
