// One output stream of a command as the runtimes take it: kept up to the cap (the overflow reported
// once), streamed to the callback, and paused while a promise the callback returned is pending.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { collectOutput } from '../../src/index.js';

const tick = (): Promise<void> => new Promise((done) => setImmediate(done));

describe('collectOutput', () => {
  it('keeps output up to the cap, hands over what is kept, and reports the overflow once', async () => {
    const stream = new PassThrough();
    const handed: string[] = [];
    let overflows = 0;
    const out = collectOutput(stream, {
      cap: 5,
      callback: (chunk) => handed.push(chunk.toString()),
      onOverflow: () => overflows++,
      onCallbackError: () => undefined,
    });
    for (const part of ['abc', 'def', 'ghi']) stream.write(part);
    await tick();
    expect(out.toBuffer().toString()).toBe('abcde');
    expect(out.truncated).toBe(true);
    expect(handed).toEqual(['abc', 'de']);
    expect(overflows).toBe(1);
  });

  it('keeps nothing and has no cap when not keeping: the callback takes all of it', async () => {
    const stream = new PassThrough();
    let handed = 0;
    const out = collectOutput(stream, {
      cap: 5,
      keep: false,
      callback: (chunk) => void (handed += chunk.length),
      onOverflow: () => expect.fail('no cap when nothing is kept'),
      onCallbackError: () => undefined,
    });
    stream.write(Buffer.alloc(100));
    await tick();
    expect(handed).toBe(100);
    expect(out.toBuffer().length).toBe(0);
    expect(out.truncated).toBe(false);
  });

  it('reads no more while the callback’s promise is pending (the command waits on its pipe)', async () => {
    const stream = new PassThrough();
    const handed: string[] = [];
    let release!: () => void;
    collectOutput(stream, {
      cap: 1000,
      callback: (chunk) => {
        handed.push(chunk.toString());
        return handed.length === 1 ? new Promise<void>((done) => (release = done)) : undefined;
      },
      onOverflow: () => undefined,
      onCallbackError: () => undefined,
    });
    stream.write('one');
    await tick();
    stream.write('two');
    await tick();
    expect(handed).toEqual(['one']);
    expect(stream.isPaused()).toBe(true);
    release();
    await tick();
    expect(handed).toEqual(['one', 'two']);
  });

  it('reports a callback that throws or rejects, and keeps going', async () => {
    const stream = new PassThrough();
    const errors: unknown[] = [];
    const out = collectOutput(stream, {
      cap: 100,
      callback: (chunk) => {
        if (chunk.toString() === 'a') throw new Error('thrown');
        return Promise.reject(new Error('rejected'));
      },
      onOverflow: () => undefined,
      onCallbackError: (err) => errors.push((err as Error).message),
    });
    stream.write('a');
    await tick();
    stream.write('b');
    await tick();
    stream.write('c');
    await tick();
    expect(errors).toEqual(['thrown', 'rejected', 'rejected']);
    expect(out.toBuffer().toString()).toBe('abc');
  });
});
