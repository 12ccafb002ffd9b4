// Attack: make a commit do more than the review shows. `chmod 666` of a codebase file showed in
// `run --diff` as a bare `M` with no diff (the content is the same), and `--commit` then made the file
// world-writable; a symlink showed as `A` with no target. Defence: the change list carries the mode a
// commit writes and the codebase's old one, and symlink targets; the CLI prints them, the unified diff
// has git's `old mode`/`new mode` and `new file mode` headers, and the commit applies exactly that.
import { chmod, readlink, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { beforeAll, describe, expect, it } from 'vitest';
import { useCliScratch } from '../helpers/cli-scratch.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;

const dirs = useCliScratch('af-sec-review-');

beforeAll(async () => {
  await writeFile(join(dirs.repo, 'output', 'report.txt'), 'same content\n');
  await chmod(join(dirs.repo, 'output', 'report.txt'), 0o644);
});

describe('a review shows everything a commit does', () => {
  it('mode changes and symlink targets are in the change list and the diff, and committed as shown', async () => {
    const r = await execa(
      process.execPath,
      [
        bin,
        'run',
        dirs.repo,
        '--data',
        dirs.data,
        '--diff',
        '--commit',
        '--',
        'sh',
        '-c',
        'chmod 666 /workspace/output/report.txt && ln -s /etc/shadow /workspace/output/link',
      ],
      { reject: false },
    );
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toContain('A /output/link -> /etc/shadow\n');
    expect(r.stderr).toContain('M /output/report.txt (mode 644 -> 666)\n');
    expect(r.stdout).toContain(
      // (execa drops the output's last newline)
      'diff --git a/output/report.txt b/output/report.txt\nold mode 100644\nnew mode 100666',
    );
    expect(r.stdout).toContain(
      'new file mode 120000\n--- /dev/null\n+++ b/output/link\n@@ -0,0 +1 @@\n+/etc/shadow\n',
    );
    // The commit applied what the review showed: that mode, that link.
    expect((await stat(join(dirs.repo, 'output', 'report.txt'))).mode & 0o7777).toBe(0o666);
    expect(await readlink(join(dirs.repo, 'output', 'link'))).toBe('/etc/shadow');
  });
});
