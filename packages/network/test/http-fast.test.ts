// The first plain-HTTP request of a connection, carried without Node's HTTP stack (src/http-fast.ts):
// which heads it takes, and that what it carries arrives as a client sent it, with its audit record.
import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import type { NetworkAuditEvent } from '../src/audit.js';
import { FlowContext } from '../src/context.js';
import type { CompiledPolicy } from '../src/decide.js';
import { connectAuthority, parseSimpleRequest, upstreamHead } from '../src/http-fast.js';
import { HttpFlows } from '../src/http-proxy.js';
import { Resolver } from '../src/resolver.js';

/** Allows everything, the test's loopback server included (a real policy never allows loopback). */
class AllowAll extends FlowContext {
  override get policy(): CompiledPolicy {
    return { decide: () => ({ allowed: true, reason: 'test' }) } as unknown as CompiledPolicy;
  }
}

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

const parse = (text: string): ReturnType<typeof parseSimpleRequest> =>
  parseSimpleRequest(Buffer.from(text, 'latin1'));

it('takes only whole HTTP/1.1 heads without a body, an upgrade or a byte after them', () => {
  expect(parse('GET /a?b HTTP/1.1\r\nHost: pub.test\r\nAccept: */*\r\n\r\n')).toEqual({
    method: 'GET',
    url: '/a?b',
    rawHeaders: ['Host', 'pub.test', 'Accept', '*/*'],
    host: 'pub.test',
  });
  expect(parse('GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n')).not.toBeNull();
  for (const refused of [
    'GET / HTTP/1.1\r\nHost: a\r\n', // not whole
    'POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody', // a body
    'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n',
    'GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n', // pipelined
    'GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n',
    'GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n',
    'GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n', // a bare LF
    'GET / HTTP/1.0\r\nHost: a\r\n\r\n',
    'CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n',
    'GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
    'GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n',
  ])
    expect(parse(refused), JSON.stringify(refused)).toBeNull();
});

it('takes a CONNECT head alone, and leaves one with bytes after it to Node', () => {
  const of = (text: string): string | null => connectAuthority(Buffer.from(text, 'latin1'));
  expect(of('CONNECT pub.test:443 HTTP/1.1\r\nHost: pub.test:443\r\n\r\n')).toBe('pub.test:443');
  expect(of('CONNECT [::1]:443 HTTP/1.0\r\n\r\n')).toBe('[::1]:443');
  expect(of('CONNECT pub.test:443 HTTP/1.1\r\n\r\n\x16\x03\x01')).toBeNull();
  expect(of('CONNECT pub.test:443 HTTP/1.1\r\nBad Name: x\r\n\r\n')).toBeNull();
  expect(of('GET / HTTP/1.1\r\nHost: a\r\n\r\n')).toBeNull();
});

it('sends the destination the request without hop-by-hop headers, asking it to close', () => {
  const head = parse('GET /x HTTP/1.1\r\nHost: a\r\nProxy-Connection: keep-alive\r\nX-A: 1\r\n\r\n');
  expect(head).not.toBeNull();
  if (head === null) return;
  expect(upstreamHead(head, '/x').toString('latin1')).toBe(
    'GET /x HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nConnection: close\r\n\r\n',
  );
});

it('carries an explicit proxy request and its answer, and audits it with the answer body bytes', async () => {
  const seen: string[] = [];
  const server = createHttpServer((req, res) => {
    seen.push(`${req.method ?? ''} ${req.url ?? ''} ${req.headers.connection ?? ''}`);
    res.end('hello');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => server.close());
  const port = (server.address() as AddressInfo).port;
  const audit: NetworkAuditEvent[] = [];
  const ctx = new AllowAll({
    policy: { mode: 'open', rules: [] },
    resolver: new Resolver(),
    maxConnections: 16,
    audit: (e) => audit.push(e),
  });
  const flows = new HttpFlows(ctx);
  const sockets: Socket[] = [];
  const point = createServer({ pauseOnConnect: true }, (client) => {
    sockets.push(client);
    flows.takeProxyClient(client);
  });
  point.listen(0, '127.0.0.1');
  await once(point, 'listening');
  closers.push(() => point.close());
  closers.push(() => sockets.forEach((s) => s.destroy()));

  const client = connect({ port: (point.address() as AddressInfo).port, host: '127.0.0.1' });
  closers.push(() => client.destroy());
  client.write(`GET http://127.0.0.1:${port}/p?q=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  const chunks: Buffer[] = [];
  client.on('data', (chunk: Buffer) => chunks.push(chunk));
  await once(client, 'close');
  expect(Buffer.concat(chunks).toString()).toMatch(/^HTTP\/1\.1 200[\s\S]*\r\n\r\nhello$/);
  expect(seen).toEqual(['GET /p?q=1 close']);
  expect(audit).toMatchObject([
    { decision: 'allow', method: 'GET', via: 'proxy', bytesUp: 0, bytesDown: 'hello'.length },
  ]);
});
