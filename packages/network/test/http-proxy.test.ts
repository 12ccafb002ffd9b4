// Plain HTTP the NAT redirected, without a sandbox: the connection dialled at accept (the address alone
// was allowed) carries the first allowed request, and the destination sees one connection, not two.
import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { FlowContext } from '../src/context.js';
import type { CompiledPolicy } from '../src/decide.js';
import { HttpFlows } from '../src/http-proxy.js';
import { Resolver } from '../src/resolver.js';
import { dial } from '../src/tunnel.js';

/**
 * Allows everything, loopback included: the test's server is on this machine's loopback, which a real
 * policy never allows (the policy's own decisions are decide.test.ts's).
 */
class AllowAll extends FlowContext {
  override get policy(): CompiledPolicy {
    return { decide: () => ({ allowed: true, reason: 'test' }) } as unknown as CompiledPolicy;
  }
  override nameIsAt(): Promise<boolean> {
    return Promise.resolve(true);
  }
}

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

it('sends a redirected request on the connection dialled at accept: one upstream connection', async () => {
  let connections = 0;
  const server = createHttpServer((_req, res) => res.end('hello'));
  server.on('connection', () => connections++);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => server.close());
  const target = { address: '127.0.0.1', port: (server.address() as AddressInfo).port };

  const ctx = new AllowAll({
    policy: { mode: 'open', rules: [] },
    resolver: new Resolver(),
    maxConnections: 16,
    audit: () => undefined,
  });
  const flows = new HttpFlows(ctx);
  const sockets: Socket[] = [];
  const point = createServer({ pauseOnConnect: true }, (client) => {
    sockets.push(client);
    const early = dial(target.address, target.port);
    sockets.push(early);
    early.once('connect', () => {
      early.pause(); // as transparent.ts leaves it: nothing read before the request is decided
      flows.takeTransparent(client, target, early);
      client.resume();
    });
  });
  point.listen(0, '127.0.0.1');
  await once(point, 'listening');
  closers.push(() => point.close());
  closers.push(() => sockets.forEach((s) => s.destroy()));

  const client = connect({ port: (point.address() as AddressInfo).port, host: '127.0.0.1' });
  closers.push(() => client.destroy());
  client.write('GET / HTTP/1.1\r\nHost: pub.test\r\n\r\n');
  const chunks: Buffer[] = [];
  client.on('data', (chunk: Buffer) => chunks.push(chunk));
  await once(client, 'close');
  expect(Buffer.concat(chunks).toString()).toMatch(/^HTTP\/1\.1 200[\s\S]*hello$/);
  expect(connections).toBe(1);
});
