// ptys are counted per host (kernel.pty.max, 4096 here, of which kernel.pty.reserve's 1024 are kept for
// the host's initial devpts), not per user: a uid of each sandbox's own does not divide them. bwrap's
// `--dev` mounts a devpts instance without `max=`, so sandbox A opening ptys until the kernel refused
// held all 3,071 that every non-initial instance shares, and sandbox B (of another data directory) got
// ENOSPC for its first. Each sandbox now binds a devpts of its own, mounted by the runtime with
// max=SANDBOX_PTY_MAX, over /dev/pts: A runs out of its own and B still gets one.
import { readFile } from 'node:fs/promises';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { SANDBOX_PTY_MAX } from '@agentfense/protocol';
import { DEFAULT_RUN_DIR } from '@agentfense/runtime-bwrap';
import { python, useSandbox } from '../helpers/security-control.js';

/**
 * Python run in a sandbox: opens pty masters (one descriptor each; the descriptor limit raised to its
 * hard limit so only the ptys can run out) until the kernel refuses one, then holds them.
 */
const EXHAUST = String.raw`
import errno, os, resource, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
try:
    while True:
        held.append(os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY))
except OSError as e:
    reason = errno.errorcode.get(e.errno, '?')
with open('/tmp/held.tmp', 'w') as f:
    f.write('%d %s' % (len(held), reason))
os.rename('/tmp/held.tmp', '/tmp/held')
time.sleep(60)
`;

/** Python run in the other sandbox: one pty pair (as a terminal program opens it), or the errno. */
const TAKE_ONE = String.raw`
import errno, os
try:
    master, slave = os.openpty()
    print('pty ok', os.ttyname(slave))
except OSError as e:
    print('pty', errno.errorcode.get(e.errno, '?'))
`;

/** Python run on the host as some uid: opens the ptmx named by $PTMX, or prints the errno. */
const OPEN_PTMX =
  "import errno, os\ntry:\n  os.close(os.open(os.environ['PTMX'], os.O_RDWR | os.O_NOCTTY)); print('ok')\n" +
  "except OSError as e:\n  print(errno.errorcode.get(e.errno, '?'))";

/** Mount points of the host's mount namespace under `dir`. */
async function mountsUnder(dir: string): Promise<string[]> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  return info
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point === dir || point.startsWith(`${dir}/`));
}

describe("a sandbox's ptys are bounded: one that takes all it can leaves the others theirs", () => {
  const a = useSandbox();
  const b = useSandbox();
  const running: Promise<unknown>[] = [];
  afterAll(async () => {
    await Promise.all(running);
  });

  it('sandbox A opens ptys until the kernel refuses: it stops at its own bound, and sandbox B still gets one', async () => {
    running.push(
      a()
        .run(python(EXHAUST), 90_000)
        .catch(() => undefined),
    );
    // A holds the host's ptys (without the bound, all of them) until it is stopped, whatever happens here.
    try {
      let held = '';
      for (let i = 0; i < 600 && held === ''; i++) {
        held = (await a().run('cat /tmp/held 2>/dev/null || true')).out;
        if (held === '') await new Promise((r) => setTimeout(r, 100));
      }
      const [count, reason] = held.split(' ');
      // A really ran out of ptys (not descriptors, not a crash of the script) ...
      expect(reason, held).toBe('ENOSPC');
      const r = await b().run(python(TAKE_ONE));
      expect(r.err).toBe('');
      expect(r.out, `A held: ${held}`).toMatch(/^pty ok \/dev\/pts\/0\n$/);
      // ... at its own bound.
      expect(Number(count), held).toBe(SANDBOX_PTY_MAX);
      // What A sees at /dev/pts is the bounded instance (the top mount there).
      const mounts = (await a().run('grep " /dev/pts " /proc/self/mountinfo')).out.trim().split('\n');
      expect(mounts.at(-1)).toMatch(new RegExp(`\\bmax=${String(SANDBOX_PTY_MAX)}\\b`));
    } finally {
      await a().cp.stopSandbox(a().id);
    }
  }, 120_000);

  it("a stopped sandbox's devpts is unmounted; a started one gets a fresh one", async () => {
    const { cp, id } = a();
    const dir = `${DEFAULT_RUN_DIR}/${id}.dev`;
    expect(await mountsUnder(dir)).toEqual([]);
    await cp.startSandbox(id);
    const r = await a().run(python(TAKE_ONE));
    expect(r.out).toMatch(/^pty ok \/dev\/pts\/0\n$/);
    expect(await mountsUnder(dir)).toEqual([`${dir}/pts`]);
    // The way to it is the sandbox's alone (the instance's ptmx is 0666): another local user cannot take
    // the sandbox's ptys; the sandbox's own uid passes.
    const [uid, gid] = (await readFile(cp.layout.sandbox(id).hostUser, 'utf8')).trim().split(':');
    const openPtmx = (asUid: string, asGid: string) =>
      execa(
        'setpriv',
        [`--reuid=${asUid}`, `--regid=${asGid}`, '--clear-groups', '--', '/usr/bin/python3', '-c', OPEN_PTMX],
        { reject: false, env: { PTMX: `${dir}/pts/ptmx` } },
      );
    expect((await openPtmx('65534', '65534')).stdout).toBe('EACCES');
    expect((await openPtmx(uid ?? '', gid ?? '')).stdout).toBe('ok');
    await cp.destroySandbox(id);
    expect(await mountsUnder(dir)).toEqual([]);
  }, 60_000);
});
