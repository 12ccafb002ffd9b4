// Per-uid kernel limits are per sandbox: every sandbox runs under a host uid of its own, leased host-wide
// (across data directories), so one sandbox that uses up what the kernel counts per user (inotify
// instances, POSIX message-queue bytes under RLIMIT_MSGQUEUE, processes under RLIMIT_NPROC) leaves another
// sandbox its own. When every sandbox ran as the one system user `agentfense-sandbox`, sandbox A holding
// every inotify instance (fs.inotify.max_user_instances, 128 here) and every message-queue byte (819200:
// 9 default queues) left sandbox B of another data directory none: EMFILE from inotify_init1 and mq_open.
import { readFile } from 'node:fs/promises';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { python, useSandbox } from '../helpers/security-control.js';
import { hostUidsOf, waitForHostProcesses } from '../helpers/host-processes.js';

/** Python run in a sandbox: takes inotify instances and message queues until the kernel refuses one. */
const EXHAUST = String.raw`
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
held, queues = 0, 0
while libc.inotify_init1(0) >= 0:
    held += 1
inotify_errno = errno.errorcode.get(ctypes.get_errno(), '?')
while libc.mq_open(('/af-q%d' % queues).encode(), os.O_CREAT | os.O_RDWR, 0o600, None) >= 0:
    queues += 1
mq_errno = errno.errorcode.get(ctypes.get_errno(), '?')
with open('/tmp/held.tmp', 'w') as f:
    f.write('%d %s %d %s' % (held, inotify_errno, queues, mq_errno))
os.rename('/tmp/held.tmp', '/tmp/held')
time.sleep(60)
`;

/** Python run in the other sandbox: one inotify instance and one message queue, or the errno. */
const TAKE_ONE = String.raw`
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
name = lambda r: 'ok' if r >= 0 else errno.errorcode.get(ctypes.get_errno(), '?')
print('inotify', name(libc.inotify_init1(0)))
print('mqueue', name(libc.mq_open(b'/af-one', os.O_CREAT | os.O_RDWR, 0o600, None)))
`;

describe('per-uid kernel limits are per sandbox, across data directories', () => {
  const a = useSandbox();
  const b = useSandbox();
  const running: Promise<unknown>[] = [];
  afterAll(async () => {
    await Promise.all(running);
  });

  it('sandbox A holds every inotify instance and message queue it can; sandbox B still gets its own', async () => {
    running.push(
      a()
        .run(python(EXHAUST), 90_000)
        .catch(() => undefined),
    );
    let held = '';
    for (let i = 0; i < 600 && held === ''; i++) {
      held = (await a().run('cat /tmp/held 2>/dev/null || true')).out;
      if (held === '') await new Promise((r) => setTimeout(r, 100));
    }
    const [instances, inotifyErr, queues, mqErr] = held.split(' ');
    // A really reached the kernel's per-user limits (not a crash of the script).
    expect(Number(instances), held).toBeGreaterThan(0);
    expect(inotifyErr, held).toBe('EMFILE');
    expect(Number(queues), held).toBeGreaterThan(0);
    expect(mqErr, held).toBe('EMFILE');
    const r = await b().run(python(TAKE_ONE));
    expect(r.err).toBe('');
    expect(r.out).toBe('inotify ok\nmqueue ok\n');
    await a().cp.stopSandbox(a().id);
  }, 120_000);

  it('two sandboxes running at once have different host uids, neither root (seen from the host)', async () => {
    const { cp: cpA, id: idA } = a();
    if ((await cpA.getSandbox(idA)).state !== 'RUNNING') await cpA.startSandbox(idA);
    const marker = `af-per-uid-${String(process.pid)}`;
    running.push(
      a()
        .run(`sleep 20 # ${marker}-a`, 30_000)
        .catch(() => undefined),
    );
    running.push(
      b()
        .run(`sleep 20 # ${marker}-b`, 30_000)
        .catch(() => undefined),
    );
    const uidsA = hostUidsOf(await waitForHostProcesses(`${marker}-a`));
    const uidsB = hostUidsOf(await waitForHostProcesses(`${marker}-b`));
    // Every process of a sandbox has one uid (real, effective, saved, filesystem), its own.
    expect(uidsA.size).toBe(1);
    expect(uidsB.size).toBe(1);
    const [uidA] = uidsA;
    const [uidB] = uidsB;
    expect(uidA).not.toBe(uidB);
    expect(uidA).not.toBe(0);
    expect(uidB).not.toBe(0);
    await Promise.all([a().cp.stopSandbox(idA), b().cp.stopSandbox(b().id)]);
  }, 60_000);

  it("a sandbox's worker serves its own uid and root only: another sandbox's uid inside the mount gets EACCES", async () => {
    for (const f of [a(), b()])
      if ((await f.cp.getSandbox(f.id)).state !== 'RUNNING') await f.cp.startSandbox(f.id);
    const workspace = a().cp.layout.sandbox(a().id).workspace;
    const [uidB, gidB] = (await readFile(b().cp.layout.sandbox(b().id).hostUser, 'utf8')).trim().split(':');
    // Root stands in the mount and becomes B's uid there: no directory on the way is checked any more (a
    // relative path), so only the worker decides. A name nobody looked up reaches it for sure.
    const stat = (asUid?: string, asGid?: string) =>
      execa(
        'setpriv',
        [
          ...(asUid === undefined ? [] : [`--reuid=${asUid}`, `--regid=${asGid ?? ''}`, '--clear-groups']),
          '--',
          'stat',
          '-c',
          '%U',
          `./af-absent-${String(process.pid)}-${asUid ?? 'root'}`,
        ],
        { cwd: workspace, reject: false },
      );
    const asRoot = await stat();
    expect(asRoot.stderr).toMatch(/No such file or directory/);
    const asB = await stat(uidB, gidB);
    expect(asB.stderr).toMatch(/Permission denied/);
  });
});
