import { describe, expect, it } from 'vitest';
import type { ExecResult } from '@agentfense/protocol';
import { ExecStream } from '../src/index.js';

const result = { exitCode: 0 } as unknown as ExecResult;

describe('ExecStream', () => {
  it('yields chunks in arrival order, buffered until read, then ends with the result', async () => {
    const stream = new ExecStream(async (out, err) => {
      out(Buffer.from('a'));
      err(Buffer.from('b'));
      await new Promise((resolve) => setTimeout(resolve, 10));
      out(Buffer.from('c'));
      return result;
    });
    const seen: string[] = [];
    for await (const chunk of stream) seen.push(`${chunk.stream}:${chunk.data.toString()}`);
    expect(seen).toEqual(['stdout:a', 'stderr:b', 'stdout:c']);
    expect(await stream.result).toBe(result);
  });

  it('throws the exec error from the iterator after the chunks that came first', async () => {
    const stream = new ExecStream((out) => {
      out(Buffer.from('partial'));
      return Promise.reject(new Error('sandbox stopped'));
    });
    const seen: string[] = [];
    await expect(
      (async () => {
        for await (const chunk of stream) seen.push(chunk.data.toString());
      })(),
    ).rejects.toThrow('sandbox stopped');
    expect(seen).toEqual(['partial']);
  });
});
