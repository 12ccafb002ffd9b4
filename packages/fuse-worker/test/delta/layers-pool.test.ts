// A checkpoint takes no trip through libuv's thread pool: right after a `sync` the pool's first requests
// wait milliseconds on a loaded host, while every step of a checkpoint is a name change in the worker's
// own directories. The requests are counted as Node creates them (async_hooks).
// createHook is the one way to see every request Node makes, whichever API issued it (test only).
// eslint-disable-next-line n/no-unsupported-features/node-builtins
import { createHook } from 'node:async_hooks';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { fixture, read, write } from './fixture.js';

/** Resource types of Node's file-system requests, each one a thread-pool trip. */
const POOL_FS = new Set(['FSREQCALLBACK', 'FSREQPROMISE', 'FILEHANDLE', 'FILEHANDLECLOSEREQ']);

/** The thread-pool file-system requests `run` makes, by type. */
async function poolTripsOf(run: () => Promise<unknown>): Promise<string[]> {
  const types: string[] = [];
  const hook = createHook({
    init(_id, type) {
      if (POOL_FS.has(type)) types.push(type);
    },
  });
  hook.enable();
  try {
    await run();
  } finally {
    hook.disable();
  }
  return types;
}

describe('a checkpoint and the thread pool', () => {
  it('takes no thread-pool trip, the first or a later one, and the view stays', async () => {
    const f = await fixture({ 'a.txt': 'A', 'd/': '' });
    await write(f.delta, '/a.txt', 'one');
    await write(f.delta, '/d/b.txt', 'B');

    expect(await poolTripsOf(() => f.delta.checkpoint({ layerDir: join(f.root, 'l1') }))).toEqual([]);
    await write(f.delta, '/a.txt', 'two');
    // The second one replaces what the first retired (closed after the answer, not before it).
    expect(await poolTripsOf(() => f.delta.checkpoint({ layerDir: join(f.root, 'l2') }))).toEqual([]);

    expect(await read(f.delta, '/a.txt')).toBe('two');
    expect(await read(f.delta, '/d/b.txt')).toBe('B');
    await f.delta.restore({ frozen: [join(f.root, 'l1')] });
    expect(await read(f.delta, '/a.txt')).toBe('one');
    await f.delta.close();

    const again = await f.open();
    expect(again.frozenLayers).toEqual([join(f.root, 'l1')]);
    expect(await read(again, '/a.txt')).toBe('one');
    await again.close();
  });
});
