// Reading a log while it is written: whole lines only, the tail, truncation, following until stopped.
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';

import { followLog, readNewLines, tailLog } from '../src/sandboxes/log-file.js';

async function logFile(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'af-log-file-'));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return join(dir, 'worker.log');
}

describe('log files', () => {
  it('tails whole lines and leaves a line still being written for the follower', async () => {
    const file = await logFile();
    expect(await tailLog(file, 5)).toEqual({ lines: [], offset: 0 }); // not there yet
    await writeFile(file, 'a\nb\nc\npart');
    const tail = await tailLog(file, 2);
    expect(tail).toEqual({ lines: ['b', 'c'], offset: 6 });
    await appendFile(file, 'ial\nd\n');
    expect(await readNewLines(file, tail.offset)).toEqual({ lines: ['partial', 'd'], offset: 16 });
    expect(await readNewLines(file, 16)).toEqual({ lines: [], offset: 16 });
  });

  it('counts offsets in bytes when the tail window starts inside a multi-byte character', async () => {
    const file = await logFile();
    // 'é' is 2 bytes; the 7-byte ending puts the start of the 16 MiB window in the middle of one.
    await writeFile(file, `ab\n${'é'.repeat(8 * 1024 * 1024)}\nlast!\n`);
    const size = 3 + 16 * 1024 * 1024 + 7;
    const tail = await tailLog(file, 5);
    expect(tail).toEqual({ lines: ['last!'], offset: size });
    await appendFile(file, 'more\n');
    expect(await readNewLines(file, tail.offset)).toEqual({ lines: ['more'], offset: size + 5 });
  });

  it('starts over when the file was replaced by a shorter one', async () => {
    const file = await logFile();
    await writeFile(file, 'x\n');
    expect(await readNewLines(file, 100)).toEqual({ lines: ['x'], offset: 2 });
  });

  it('follows new lines until aborted, or until done() says so', async () => {
    const file = await logFile();
    await writeFile(file, 'old\n');
    const seen: string[] = [];
    const stop = new AbortController();
    const following = followLog(file, {
      offset: 4,
      signal: stop.signal,
      pollMs: 10,
      onLines: (lines) => {
        seen.push(...lines);
        if (seen.includes('two')) stop.abort();
      },
    });
    await appendFile(file, 'one\ntw');
    await new Promise((r) => setTimeout(r, 50));
    await appendFile(file, 'o\nthree\n');
    await following;
    expect(seen.slice(0, 2)).toEqual(['one', 'two']);

    let polls = 0;
    await followLog(file, {
      offset: 0,
      signal: new AbortController().signal,
      pollMs: 5,
      onLines: () => {},
      done: () => ++polls === 3,
    });
    expect(polls).toBe(3);
  });
});
