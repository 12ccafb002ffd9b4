import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { LogFile, createWorkerLogger } from '../src/worker/log.js';

describe('createWorkerLogger', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'af-worker-log-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const lines = async (file: string): Promise<Record<string, unknown>[]> =>
    (await readFile(file, 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);

  it('writes pino-style JSON lines at or above its level, with base and child bindings', async () => {
    const file = join(dir, 'a.log');
    const root = createWorkerLogger(new LogFile(file), 'info', { pid: 7 });
    const log = root.child({ sandbox: 'sb_1' });
    log.debug({ x: 1 }, 'hidden');
    log.info({ x: 2 }, 'shown');
    log.warn('plain message');
    const [first, second, ...rest] = await lines(file);
    expect(rest).toEqual([]);
    expect(first).toMatchObject({ level: 30, pid: 7, sandbox: 'sb_1', x: 2, msg: 'shown' });
    expect(typeof first?.['time']).toBe('number');
    expect(second).toMatchObject({ level: 40, msg: 'plain message' });
  });

  it('serializes errors with type, message, stack and code', async () => {
    const file = join(dir, 'a.log');
    const err = Object.assign(new TypeError('bad'), { code: 'EBAD' });
    createWorkerLogger(new LogFile(file), 'info', {}).error({ err }, 'failed');
    const [line] = await lines(file);
    expect(line?.['err']).toMatchObject({ type: 'TypeError', message: 'bad', code: 'EBAD' });
    expect(String((line?.['err'] as { stack: string }).stack)).toContain('TypeError: bad');
  });

  it('switches to another file on reopen (a pooled worker learns its sandbox at mount)', async () => {
    const pool = join(dir, 'pool.log');
    const mine = join(dir, 'sandbox', 'worker.log');
    // The control plane makes the sandbox's directory before a worker mounts it; the worker makes none.
    await mkdir(join(dir, 'sandbox'));
    const file = new LogFile(pool);
    const log = createWorkerLogger(file, 'info', {});
    log.info('ready');
    file.reopen(mine);
    log.info('mounted');
    expect((await lines(pool)).map((l) => l['msg'])).toEqual(['ready']);
    expect((await lines(mine)).map((l) => l['msg'])).toEqual(['mounted']);
  });
});
