// The control plane's log file: lines are appended whole, and a line that cannot be written (a full
// filesystem: /dev/full answers every write with ENOSPC) is dropped and counted, never thrown at the
// code that logged, with one note on stderr per run of failures.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SafeLogFile } from '../src/log-destination.js';

describe('the control log file', () => {
  it('appends lines, making its directory', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'af-log-dest-'));
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const file = new SafeLogFile({ path: join(dir, 'logs', 'control.log') });
    onTestFinished(() => file.close());
    const logger = pino({ base: null, timestamp: false }, file);
    logger.info('one');
    logger.warn({ n: 2 }, 'two');
    const lines = (await readFile(join(dir, 'logs', 'control.log'), 'utf8')).trim().split('\n');
    expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual([
      { level: 30, msg: 'one' },
      { level: 40, n: 2, msg: 'two' },
    ]);
    expect(file.dropped).toBe(0);
  });

  it('drops and counts lines on a full filesystem, saying so once, never throwing', () => {
    const said: string[] = [];
    const file = new SafeLogFile({ path: '/dev/full', onFirstFailure: (m) => said.push(m) });
    onTestFinished(() => file.close());
    const logger = pino({}, file);
    expect(() => {
      for (let i = 0; i < 5; i++) logger.error({ err: new Error('boom') }, 'request failed');
    }).not.toThrow();
    expect(file.dropped).toBe(5);
    expect(said).toEqual([
      'agentfense: cannot write the log /dev/full (ENOSPC: no space left on device, write); log lines are dropped until it can',
    ]);
  });
});
