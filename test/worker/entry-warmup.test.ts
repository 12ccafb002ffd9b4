// Entry warm-up on a real mount (packages/fuse-worker/src/fs/entry-warmup.ts): after the sandbox's first
// access the worker lists the tree through its own mount, so the kernel holds every visible name before the
// sandbox asks for it. What the kernel then holds must be exactly what LOOKUPs would have answered: hidden
// names stay absent, rule changes take it back, and nothing runs while allowed accesses are audited.
import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { WarmupStats } from '@agentfense/protocol';
import { AGENT_SAFE, mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';
import type { MountedFixture } from '../helpers/worker-fixture.js';
import { opCount } from '../helpers/store-ahead.js';
import { nativeCount, waitInDelta, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const run = promisify(execFile);

/** dirs x files small files, plus what AGENT_SAFE hides. */
function tree(dirs: number, files: number): Record<string, string> {
  const t: Record<string, string> = {
    '.env': 'SECRET=1\n',
    'secrets/key.pem': 'k\n',
    'd00/.env.local': 'x\n',
  };
  for (let d = 0; d < dirs; d++) {
    for (let f = 0; f < files; f++)
      t[`d${String(d).padStart(2, '0')}/f${String(f).padStart(2, '0')}.txt`] = `${d}.${f}\n`;
  }
  return t;
}

/** Waits for the next finished warm-up (the `entry-warmup` count reaching `n`) and returns its summary. */
async function warmedUp(f: MountedFixture, n = 1): Promise<WarmupStats> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const stats = await f.worker.client.request('stats', {});
    if ((stats.ops['entry-warmup']?.count ?? 0) >= n && stats.warmup !== undefined) return stats.warmup;
    if (Date.now() > deadline) throw new Error(`no warm-up finished: ${JSON.stringify(stats.ops)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('entry warm-up', () => {
  useMountHygiene();

  it('after the first access, a first stat of every visible file sends no LOOKUP; hidden names stay absent', async () => {
    const f = await mountFixture({ tree: tree(12, 15), rules: AGENT_SAFE });
    expect((await f.worker.client.request('stats', {})).fuse?.features.entryWarmup).toBe(true);
    // Nothing happens before the sandbox looks inside: an untouched sandbox costs nothing.
    await new Promise((r) => setTimeout(r, 200));
    expect(await opCount(f, 'entry-warmup')).toBe(0);
    expect(await opCount(f, 'readdirplus')).toBe(0);

    expect((await f.sandbox('cat d00/f00.txt')).stdout).toBe('0.0\n');
    const summary = await warmedUp(f);
    // root: .env (hidden, not listed), secrets (hidden), d00..d11; each dNN: its files (+ .env.local hidden)
    expect(summary).toMatchObject({ end: 'complete', directories: 13, entries: 12 + 12 * 15 });
    const lookups = await opCount(f, 'lookup');
    const t = tree(12, 15);
    const files = Object.keys(t).filter((p) => /^d\d\d\/f/.test(p));
    const r = await f.sandbox(`stat -c %s ${files.join(' ')}`);
    expect(r.stdout).toBe(files.map((p) => `${t[p]!.length}\n`).join(''));
    expect(await opCount(f, 'lookup')).toBe(lookups);

    // Hidden names were never listed: asking for one is a LOOKUP, answered ENOENT.
    const hidden = await f.sandbox(
      'stat .env secrets d00/.env.local 2>&1 | grep -c "No such file"; ls -A . d00 | grep -c env',
    );
    expect(hidden.stdout).toBe('3\n0\n');
    expect(await opCount(f, 'lookup')).toBeGreaterThan(lookups);
  }, 60_000);

  it('stops at its entry budget (checked between directories) and says so', async () => {
    const f = await mountFixture({ tree: tree(12, 15), rules: AGENT_SAFE, warmupEntries: 40 });
    await f.sandbox('ls d00 >/dev/null');
    // the root's 12 visible names, then two directories of 15: the third crosses the budget
    expect(await warmedUp(f)).toMatchObject({ end: 'budget', directories: 3, entries: 42 });
  }, 60_000);

  it('a rule change takes the warmed entries back; the next access warms again under the new rules', async () => {
    const f = await mountFixture({ tree: tree(6, 5), rules: AGENT_SAFE });
    await f.sandbox('cat d00/f00.txt');
    expect(await warmedUp(f)).toMatchObject({ end: 'complete', entries: 6 + 6 * 5 });
    await f.worker.client.request('setRules', {
      rules: [...AGENT_SAFE, { pattern: 'd03/', permission: 'none', priority: 200 }],
    });
    const r = await f.sandbox('cat d03/f00.txt 2>&1; ls');
    expect(r.stdout).toBe('cat: d03/f00.txt: No such file or directory\nd00\nd01\nd02\nd04\nd05\n');
    expect(await warmedUp(f, 2)).toMatchObject({ end: 'complete', entries: 5 + 5 * 5 });
  }, 60_000);

  it('does not run while allowed accesses are audited; runs once they no longer are', async () => {
    const f = await mountFixture({ tree: tree(3, 3), rules: AGENT_SAFE, auditAllowed: true });
    await f.sandbox('cat d00/f00.txt; ls d01 >/dev/null');
    await new Promise((r) => setTimeout(r, 300));
    expect(await opCount(f, 'entry-warmup')).toBe(0);
    // the sandbox's accesses are in the trail
    await f.waitAudit((e) => e.path === '/d00/f00.txt');
    await f.worker.client.request('setAudit', { allowed: false });
    await f.sandbox('cat d00/f01.txt');
    expect(await warmedUp(f)).toMatchObject({ end: 'complete', entries: 3 + 3 * 3 });
  }, 60_000);

  it('waits while the sandbox is busy with requests the binding answers in C, then runs', async () => {
    const f = await mountFixture({ tree: { ...tree(6, 5), output: { dir: true } }, rules: WRITABLE_OUTPUT });
    // A read arms the warm-up; then 2.5 s of WRITEs to a file made in a fresh directory: the binding
    // answers the CREATE and every WRITE in C, so no request of it reaches the worker's handlers.
    const busy = f.sandbox(`python3 -c '
import os, time
open("d00/f00.txt").read()
os.makedirs("output/w/x")
fd = os.open("output/w/x/started", os.O_WRONLY | os.O_CREAT, 0o644)
end = time.time() + 2.5
while time.time() < end:
    os.write(fd, b"x" * 512)
'`);
    await waitInDelta(f, 'output/w/x/started');
    await new Promise((r) => setTimeout(r, 1000));
    expect(await nativeCount(f, 'write-native')).toBeGreaterThan(100);
    // busy all along: no walk started, no listing sent
    expect(await opCount(f, 'readdirplus')).toBe(0);
    expect((await busy).code).toBe(0);
    expect(await warmedUp(f)).toMatchObject({ end: 'complete' });
  }, 60_000);

  it('is off with warmupEntries 0 and with AGENTFENSE_FUSE_DISABLE=entryWarmup', async () => {
    const zero = await mountFixture({ tree: tree(3, 3), rules: AGENT_SAFE, warmupEntries: 0 });
    await zero.sandbox('cat d00/f00.txt');
    const previous = process.env.AGENTFENSE_FUSE_DISABLE;
    process.env.AGENTFENSE_FUSE_DISABLE = 'entryWarmup';
    let off: MountedFixture;
    try {
      off = await mountFixture({ tree: tree(3, 3), rules: AGENT_SAFE });
    } finally {
      if (previous === undefined) delete process.env.AGENTFENSE_FUSE_DISABLE;
      else process.env.AGENTFENSE_FUSE_DISABLE = previous;
    }
    const fuse = (await off.worker.client.request('stats', {})).fuse;
    expect(fuse?.features.entryWarmup).toBe(false);
    expect(fuse?.disabled).toContain('entryWarmup');
    await off.sandbox('cat d00/f00.txt');
    await new Promise((r) => setTimeout(r, 300));
    expect(await opCount(zero, 'entry-warmup')).toBe(0);
    expect(await opCount(off, 'entry-warmup')).toBe(0);
    // the sandbox's own accesses only: one LOOKUP per name on the path, no listing
    expect(await opCount(off, 'readdirplus')).toBe(0);
  }, 60_000);

  it('lists devices, FIFOs and sockets without opening them or hanging the worker', async () => {
    const f = await mountFixture({ tree: { 'a/x.txt': 'x\n', 'b/y.txt': 'y\n' }, rules: AGENT_SAFE });
    // Created behind the mount, as a codebase can hold them (the mount itself is nodev).
    await mkdir(join(f.lower, 'special'));
    await run('mknod', [join(f.lower, 'special/null'), 'c', '1', '3']);
    await run('mkfifo', [join(f.lower, 'special/fifo')]);
    await run('python3', [
      '-c',
      'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])',
      join(f.lower, 'special/sock'),
    ]);
    await f.sandbox('cat a/x.txt');
    // A character device is listed with an unknown type: a walker that stat()ed it synchronously on the
    // worker's own thread would deadlock the mount (Node's Dir does).
    expect(await warmedUp(f)).toMatchObject({ end: 'complete', directories: 4, entries: 3 + 1 + 1 + 3 });
    expect((await f.sandbox('ls special')).stdout).toBe('fifo\nnull\nsock\n');
  }, 60_000);

  it('a worker killed during the walk exits at once, and its walker with it', async () => {
    // 300 directories: the walk takes a while (it lists one directory per READDIRPLUS round trip)
    const big: Record<string, string> = {};
    for (let d = 0; d < 300; d++) for (let i = 0; i < 30; i++) big[`d${d}/f${i}`] = 'x';
    const f = await mountFixture({ tree: big, rules: AGENT_SAFE });
    await f.sandbox('cat d0/f0');
    // The walk runs in a process of its own (af-walk): a worker thread waiting inside a request on the
    // worker's own mount would keep the killed worker from exiting until its connection was aborted.
    let walker: string | undefined;
    for (let i = 0; i < 200 && walker === undefined; i++) {
      walker =
        (
          await run('pgrep', ['-P', String(f.worker.pid), 'af-walk']).catch(() => ({ stdout: '' }))
        ).stdout.trim() || undefined;
      if (walker === undefined) await new Promise((r) => setTimeout(r, 5));
    }
    expect(walker, 'the walker runs').toMatch(/^\d+$/);
    const killedAt = Date.now();
    process.kill(f.worker.pid, 'SIGKILL');
    // gone: no such process, or only a zombie left (every thread exited, waiting to be reaped)
    const gone = async (pid: string | number): Promise<boolean> => {
      const tasks = await readdir(`/proc/${pid}/task`).catch(() => []);
      const states = await Promise.all(
        tasks.map((t) =>
          readFile(`/proc/${pid}/task/${t}/stat`, 'utf8').then(
            (st) => st.split(') ')[1]?.[0],
            () => 'Z',
          ),
        ),
      );
      return states.every((state) => state === 'Z');
    };
    while (!(await gone(f.worker.pid)) || !(await gone(walker!))) {
      expect(Date.now() - killedAt, 'worker and walker gone').toBeLessThan(2000);
      await new Promise((r) => setTimeout(r, 20));
    }
    // Nothing of ours is left waiting in the kernel: the mount answers ENOTCONN at once.
    expect((await f.host('stat d00 2>&1; true')).stdout).toContain('Transport endpoint is not connected');
  }, 60_000);
});
