// The stdio transport of `agentfense mcp` with its per-message limit, over in-memory streams: messages split
// across chunks arrive whole, an oversized one is answered with a JSON-RPC error carrying its id (first or
// last in the object) and the limit, and the messages after it arrive as usual.
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { requestId } from '../src/mcp/message-limit.js';
import { LimitedStdioServerTransport } from '../src/mcp/stdio-transport.js';

function setUp(maxMessageBytes: number): {
  stdin: PassThrough;
  received: JSONRPCMessage[];
  answers: () => unknown[];
} {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  let written = '';
  stdout.on('data', (chunk: Buffer) => (written += chunk.toString()));
  const transport = new LimitedStdioServerTransport({ stdin, stdout, maxMessageBytes });
  const received: JSONRPCMessage[] = [];
  transport.onmessage = (m) => received.push(m);
  void transport.start();
  const answers = (): unknown[] =>
    written
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as unknown);
  return { stdin, received, answers };
}

/** Lets the streams deliver what was written. */
const flush = (): Promise<void> => new Promise((done) => setImmediate(done));

describe('LimitedStdioServerTransport', () => {
  it('delivers messages split across chunks and several per chunk', async () => {
    const { stdin, received } = setUp(1024);
    stdin.write('{"jsonrpc":"2.0","id":1,"method":"ping"}\n{"jsonrpc":"2.0",');
    stdin.write('"id":2,"method":"pi');
    stdin.write('ng"}\r\n');
    await flush();
    expect(received).toEqual([
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { jsonrpc: '2.0', id: 2, method: 'ping' },
    ]);
  });

  it('answers an oversized request with its id and the limit, then reads on', async () => {
    const { stdin, received, answers } = setUp(100);
    const big = 'x'.repeat(300);
    stdin.write(`{"method":"tools/call","params":{"content":"${big.slice(0, 150)}`);
    stdin.write(`${big.slice(150)}"},"jsonrpc":"2.0","id":7}\n`);
    stdin.write(`{"jsonrpc":"2.0","id":"a","method":"x","params":{"c":"${big}"}}\n`);
    stdin.write('{"jsonrpc":"2.0","id":8,"method":"ping"}\n');
    await flush();
    const refused = answers() as { jsonrpc: string; id: unknown; error: { code: number; message: string } }[];
    expect(refused.map((a) => [a.jsonrpc, a.id, a.error.code])).toEqual([
      ['2.0', 7, -32600],
      ['2.0', 'a', -32600],
    ]);
    for (const a of refused) expect(a.error.message).toMatch(/at most 100 bytes .*Send less per request/);
    expect(received).toEqual([{ jsonrpc: '2.0', id: 8, method: 'ping' }]);
  });
});

describe('requestId', () => {
  it('finds a top-level id at either end, never a nested one', () => {
    expect(requestId('{"method":"m","params":{', '"z"},"jsonrpc":"2.0","id":12}')).toBe(12);
    expect(requestId('{"jsonrpc":"2.0","id":"r-1","method":', '"x"}}')).toBe('r-1');
    expect(requestId('{"method":"m","params":{', '"p":{"id":3}}}')).toBeNull();
    expect(requestId('garbage', 'garbage')).toBeNull();
  });
});
