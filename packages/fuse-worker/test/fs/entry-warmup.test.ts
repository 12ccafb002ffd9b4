// The entry warm-up's walker (native/af-walk.c, driven by src/fs/entry-warmup.ts) on a plain directory
// tree; test/worker/entry-warmup.test.ts runs it on a real mount. Breadth first, within its budget, and
// never through a symlink, whatever is swapped in between a listing and the visit of what it listed.
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rename, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';

import { AF_WALK, EntryWarmup, START_QUIET_MS, type WarmupSummary } from '../../src/fs/entry-warmup.js';

const run = promisify(execFile);
const roots: string[] = [];
afterEach(async () => {
  for (const r of roots.splice(0)) await rm(r, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'af-warmup-unit-'));
  roots.push(d);
  return d;
}

/** One walk through EntryWarmup, as the worker runs it. */
async function warm(root: string, budget?: number): Promise<WarmupSummary> {
  let done: (s: WarmupSummary) => void = () => undefined;
  const finished = new Promise<WarmupSummary>((resolve) => (done = resolve));
  const warmup = new EntryWarmup({
    mountpoint: root,
    ...(budget === undefined ? {} : { budget }),
    allowed: () => true,
    generation: () => 0,
    onDone: (s) => done(s),
    onError: (err) => {
      throw err;
    },
  });
  warmup.touch();
  const summary = await finished;
  await warmup.stop();
  return summary;
}

describe('entry warm-up walker', () => {
  it('lists every directory breadth first and counts every name', async () => {
    const root = await tempDir();
    await mkdir(join(root, 'a/b/c'), { recursive: true });
    await mkdir(join(root, 'x'));
    await writeFile(join(root, 'a/f.txt'), 'f');
    await symlink('/etc', join(root, 'l'));
    // a, x, l; b, f.txt; c
    expect(await warm(root)).toMatchObject({ end: 'complete', directories: 5, entries: 6, refused: 0 });
  });

  it('starts only once the sandbox has been quiet for START_QUIET_MS after the first access', async () => {
    const root = await tempDir();
    await mkdir(join(root, 'a'));
    let doneAt = 0;
    const warmup = new EntryWarmup({
      mountpoint: root,
      allowed: () => true,
      generation: () => 0,
      onDone: () => (doneAt = performance.now()),
    });
    warmup.touch();
    // The sandbox keeps sending requests (one in flight part of the time) for 3 x START_QUIET_MS.
    const busyUntil = performance.now() + 3 * START_QUIET_MS;
    let quietFrom = 0;
    while (performance.now() < busyUntil) {
      expect(warmup.requestStarted(12345, 1000)).toBe(true);
      await new Promise((r) => setTimeout(r, 20));
      warmup.requestEnded();
      quietFrom = performance.now();
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(doneAt).toBe(0);
    while (doneAt === 0) {
      expect(performance.now() - quietFrom).toBeLessThan(10 * START_QUIET_MS);
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(doneAt - quietFrom).toBeGreaterThanOrEqual(START_QUIET_MS - 1);
    await warmup.stop();
  });

  it('stops once the budget is used, between two directories', async () => {
    const root = await tempDir();
    for (const d of ['d1', 'd2', 'd3']) {
      await mkdir(join(root, d));
      for (let i = 0; i < 4; i++) await writeFile(join(root, d, `f${i}`), '');
    }
    // root (3 names), one directory (4): 7 >= 6, so nothing more
    expect(await warm(root, 6)).toMatchObject({ end: 'budget', directories: 2, entries: 7 });
  });

  it('stops inside a directory too large for its budget (a sandbox can make millions of names)', async () => {
    const root = await tempDir();
    await mkdir(join(root, 'big'));
    await Promise.all(Array.from({ length: 5000 }, (_, i) => writeFile(join(root, 'big', `f${i}`), '')));
    const summary = await warm(root, 100);
    expect(summary).toMatchObject({ end: 'budget', directories: 2 });
    // one getdents buffer past the budget at most, never the directory's 5,000
    expect(summary.entries).toBeGreaterThanOrEqual(100);
    expect(summary.entries).toBeLessThan(1000);
  });

  it('reports a tree it cannot open as stopped, and a missing walker as an error', async () => {
    expect(await warm(join(await tempDir(), 'absent'))).toMatchObject({ end: 'stopped', entries: 0 });
    const error = await new Promise<Error>((resolve) => {
      new EntryWarmup({
        mountpoint: roots[0]!,
        allowed: () => true,
        generation: () => 0,
        program: '/nonexistent/af-walk',
        onError: resolve,
      }).touch();
    });
    expect((error as NodeJS.ErrnoException).code).toBe('ENOENT');
  });

  it('a directory swapped for a symlink after its parent was listed is refused, never followed', async () => {
    const root = await tempDir();
    const outside = await tempDir();
    await mkdir(join(outside, 'must-not-be-listed'));
    await mkdir(join(root, 'p/victim'), { recursive: true });
    await utimes(outside, new Date('2001-01-01T00:00:00Z'), new Date());
    const atime = (await stat(outside)).atimeMs;
    // The walker stops itself right after listing p (victim queued as a directory); the swap happens then.
    const child = spawn(AF_WALK, ['100', root], {
      env: { ...process.env, AF_WALK_STOP_AFTER: 'p' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    for (let i = 0; ; i++) {
      const state = (await readFile(`/proc/${child.pid}/stat`, 'utf8')).split(') ')[1]?.[0];
      if (state === 'T') break;
      expect(i).toBeLessThan(500);
      await new Promise((r) => setTimeout(r, 10));
    }
    await rename(join(root, 'p/victim'), join(root, 'p/moved'));
    await symlink(outside, join(root, 'p/victim'));
    child.kill('SIGCONT');
    expect(await exited).toBe(0);
    // root (p), p (victim): two directories listed, victim refused
    expect(out).toBe('2 2 1 complete\n');
    expect((await stat(outside)).atimeMs).toBe(atime);
  });

  it('refuses bad arguments with a usage line', async () => {
    await expect(run(AF_WALK, ['many', '/'])).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining('BUDGET must be a number') as unknown,
    });
  });
});
