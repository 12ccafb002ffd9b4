// runtime/thread-group.ts: a process has ended only when every thread of it exited. /proc shows a leader
// that exited alone as "Z" while its other threads run on; the sweeps must not take that for an end.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { processEnded } from '../../src/index.js';

const made: string[] = [];
afterEach(async () => {
  for (const dir of made.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** A /proc tree with one process `pid` whose threads have the given states (the leader first). */
async function fakeProc(pid: number, states: readonly string[]): Promise<string> {
  const proc = await mkdtemp(join(tmpdir(), 'af-thread-group-'));
  made.push(proc);
  for (const [i, state] of states.entries()) {
    const tid = pid + i;
    await mkdir(join(proc, String(pid), 'task', String(tid)), { recursive: true });
    // A command name with spaces and ')' in it, as stat shows it.
    await writeFile(join(proc, String(pid), 'task', String(tid), 'stat'), `${tid} (a) b) ${state} 1 1 1\n`);
  }
  return proc;
}

describe('processEnded', () => {
  it('a running or sleeping leader has not ended', async () => {
    const root = await fakeProc(100, ['S', 'R']);
    expect(processEnded(100, 'S', root)).toBe(false);
    expect(processEnded(100, 'R', root)).toBe(false);
  });

  it('a zombie leader with a live thread has not ended', async () => {
    const root = await fakeProc(100, ['Z', 'Z', 'S']);
    expect(processEnded(100, 'Z', root)).toBe(false);
  });

  it('a zombie whose threads all exited has ended, and so has a process that is gone', async () => {
    expect(processEnded(100, 'Z', await fakeProc(100, ['Z', 'X']))).toBe(true);
    const root = await fakeProc(100, ['Z']);
    expect(processEnded(100, 'Z', root)).toBe(true);
    expect(processEnded(101, 'X', root)).toBe(true);
  });
});
