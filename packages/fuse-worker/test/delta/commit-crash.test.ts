// A commit is journalled: whatever moment a process dies in (every host write, journal record and intent
// step of a commit is tried as that moment), the next commit on the reopened delta finishes it, and the
// codebase ends exactly as after an uninterrupted commit: every change applied once, conflicts still
// conflicts, no temporary file left, nothing of the sandbox's lost.
import { lstat, readdir, readFile, readlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';

import type { DeltaContext } from '../../src/delta/context.js';
import type { Delta } from '../../src/delta/delta.js';
import { fixture, write, type Fixture } from './fixture.js';

// syncfs of the machine's disk would cost 40-200 ms per batch here; what it is called for is checked below.
const synced = vi.hoisted(() => ({ calls: [] as string[][] }));
vi.mock('../../src/host/sync-fs.js', () => ({
  syncFilesystem: async (dir: string): Promise<boolean> => {
    // What the delta's upper tree holds when the codebase is flushed: the copies are still there.
    synced.calls.push(await readdir(join(dir, '..', 'delta', 'upper'), { recursive: true }));
    return true;
  },
}));

/** The process "dies" at a step: that call and every later one of the commit fail. */
class Crash extends Error {}

/** The steps of a commit that change something on disk, per part of the delta. */
const MUTATING: Record<'codebase' | 'upper' | 'journal' | 'commits', readonly string[]> = {
  codebase: ['open', 'mkdir', 'unlink', 'rmdir', 'symlink', 'chmod', 'utimes', 'rename', 'removeTree'],
  upper: ['unlink', 'rmdir', 'removeTree'],
  journal: ['record', 'compact'],
  commits: ['begin', 'finish'],
};

/**
 * Makes `delta` die at its `crashAt`-th mutating step (never, with Infinity) and returns the step count.
 * Every call on a part of the delta after the death throws too, as nothing runs in a dead process.
 */
function failpoint(delta: Delta, crashAt: number): { steps: () => number } {
  const ctx = (delta as unknown as { ctx: DeltaContext }).ctx;
  let steps = 0;
  let dead = false;
  for (const part of Object.keys(MUTATING) as (keyof typeof MUTATING)[]) {
    const target = ctx[part] as unknown as Record<string, unknown>;
    const proxy = new Proxy(target, {
      get(obj, name, receiver) {
        const value = Reflect.get(obj, name, receiver) as unknown;
        if (typeof value !== 'function') return value;
        // Closing descriptors at the test's end is no step of the commit; it runs on the part itself
        // (whose private members a proxy as `this` cannot reach).
        if (name === 'close') return (value as (...a: unknown[]) => unknown).bind(obj);
        return (...args: unknown[]) => {
          if (dead) throw new Crash('dead');
          if (MUTATING[part].includes(String(name))) {
            if (steps === crashAt) {
              dead = true;
              throw new Crash(`died before ${part}.${String(name)}`);
            }
            steps++;
          }
          return (value as (...a: unknown[]) => unknown).apply(obj, args);
        };
      },
    });
    (ctx as unknown as Record<string, unknown>)[part] = proxy;
  }
  return { steps: () => steps };
}

/** The codebase as a user sees it: type, mode and content (or link target) of every entry. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir, { recursive: true })).sort()) {
    const path = join(dir, name);
    const st = await lstat(path);
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isSymbolicLink()) out[name] = `link -> ${await readlink(path)}`;
    else if (st.isDirectory()) out[name] = `dir ${mode}`;
    else out[name] = `file ${mode} ${await readFile(path, 'utf8')}`;
  }
  return out;
}

/** Every kind of change a commit applies, and one file someone else changed meanwhile (a conflict). */
async function scenario(): Promise<Fixture> {
  const f = await fixture({
    'mod.txt': 'old',
    'del.txt': 'gone',
    'gone/a': 'a',
    'gone/b': 'b',
    'swap/x': 'x',
    'conflict.txt': 'base',
    'keep.txt': 'kept',
    'tool.sh': '#!/bin/sh\n',
  });
  await write(f.delta, '/mod.txt', 'new');
  await f.delta.unlink('/del.txt');
  await f.delta.unlink('/gone/a');
  await f.delta.unlink('/gone/b');
  await f.delta.rmdir('/gone');
  await f.delta.unlink('/swap/x');
  await f.delta.rmdir('/swap');
  await write(f.delta, '/swap', 'a file where a directory was');
  await f.delta.mkdir('/new', 0o750);
  await f.delta.mkdir('/new/deep', 0o755);
  for (let i = 0; i < 2; i++) await write(f.delta, `/new/deep/f${i}`, `content ${i}`);
  await f.delta.symlink('mod.txt', '/link');
  await f.delta.setattr('/tool.sh', { mode: 0o755 });
  await write(f.delta, '/setuid', 'program', 0o4755);
  await write(f.delta, '/conflict.txt', 'sandbox');
  await writeFile(join(f.lower, 'conflict.txt'), 'someone else');
  return f;
}

describe('Delta commit after a crash at any moment', () => {
  it('finishes the commit on the next try, exactly as an uninterrupted commit would have', async () => {
    const reference = await scenario();
    const counted = failpoint(reference.delta, Number.POSITIVE_INFINITY);
    const whole = await reference.delta.commit({ mode: 'detect-conflicts' });
    expect(whole.conflicts.map((c) => c.path)).toEqual(['/conflict.txt']);
    const expected = await snapshot(reference.lower);
    expect(expected['setuid']).toBe('file 755 program');
    const left = await reference.delta.changes();
    const total = counted.steps();
    expect(total).toBeGreaterThan(40);

    for (let crashAt = 0; crashAt < total; crashAt++) {
      const f = await scenario();
      failpoint(f.delta, crashAt);
      await expect(f.delta.commit({ mode: 'detect-conflicts' })).rejects.toThrow();
      // The next worker opens the same delta and is asked to commit again.
      const again = await f.open();
      const finished = await again.commit({ mode: 'detect-conflicts' });
      const state = {
        crashAt,
        codebase: await snapshot(f.lower),
        conflicts: finished.conflicts.map((c) => c.path),
        left: await again.changes(),
        intent: await readdir(join(f.deltaDir, 'meta')),
      };
      expect(state).toEqual({
        crashAt,
        codebase: expected,
        conflicts: ['/conflict.txt'],
        left,
        intent: expect.not.arrayContaining(['commit-intent.json']) as unknown,
      });
    }
  }, 120_000);

  it('keeps the intent of an interrupted commit, and a discard of everything gives it up', async () => {
    const f = await scenario();
    const stop = new AbortController();
    stop.abort(new Error('stopping'));
    const cut = await f.delta.commit({ mode: 'detect-conflicts', signal: stop.signal });
    expect(cut.interrupted).toBe('stopping');
    expect(await readdir(join(f.deltaDir, 'meta'))).toContain('commit-intent.json');
    await f.delta.discard();
    expect(await readdir(join(f.deltaDir, 'meta'))).not.toContain('commit-intent.json');
    expect(await readFile(join(f.lower, 'mod.txt'), 'utf8')).toBe('old');
  });

  it('drops the sandbox copies only after the codebase was flushed', async () => {
    const f = await fixture({});
    await write(f.delta, '/a.txt', 'A');
    synced.calls.length = 0;
    await f.delta.commit({ mode: 'detect-conflicts' });
    expect(synced.calls).toEqual([['a.txt']]);
    expect(await readdir(join(f.deltaDir, 'upper'))).toEqual([]);
  });
});
