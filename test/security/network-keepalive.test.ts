// Plain HTTP is decided per request: after an allowed first request (carried without Node's HTTP stack,
// packages/network/src/http-fast.ts), a second one on the same connection must not reach the destination
// unless it is decided allowed itself. The attack: GET is allowed, POST is not; the agent sends its GET
// and then, on the same connection, a POST with the data it wants out, once after the answer and once
// right behind the GET. In-process policy point on loopback (the policy is by method alone, as a
// `methods` rule decides; loopback itself is never allowed by a real policy).
import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import type { NetworkAuditEvent } from '../../packages/network/src/audit.js';
import { FlowContext } from '../../packages/network/src/context.js';
import type { CompiledPolicy, Destination } from '../../packages/network/src/decide.js';
import { HttpFlows } from '../../packages/network/src/http-proxy.js';
import { Resolver } from '../../packages/network/src/resolver.js';

class GetOnly extends FlowContext {
  override get policy(): CompiledPolicy {
    const decide = (d: Destination) =>
      d.method === 'POST'
        ? { allowed: false, reason: 'rule 0 (allow pub.test methods GET)' }
        : { allowed: true, reason: 'rule 0 (allow pub.test methods GET)' };
    return { decide } as unknown as CompiledPolicy;
  }
}

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

async function listening(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => server.close());
  return (server.address() as AddressInfo).port;
}

/** A destination that answers each connection's first request without saying it closes, then closes. */
async function destination(): Promise<{ port: number; received: () => string }> {
  let received = '';
  const server = createServer((socket) => {
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (received.includes('\r\n\r\n')) socket.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    });
  });
  return { port: await listening(server), received: () => received };
}

async function policyPoint(audit: NetworkAuditEvent[]): Promise<number> {
  const flows = new HttpFlows(
    new GetOnly({
      policy: { mode: 'open', rules: [] },
      resolver: new Resolver(),
      maxConnections: 16,
      audit: (e) => audit.push(e),
    }),
  );
  const sockets: Socket[] = [];
  const point = createServer({ pauseOnConnect: true }, (client) => {
    sockets.push(client);
    flows.takeProxyClient(client);
  });
  closers.push(() => sockets.forEach((s) => s.destroy()));
  return listening(point);
}

const request = (port: number, method: string, body = ''): string =>
  `${method} http://127.0.0.1:${port}/${method.toLowerCase()} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
  (body === '' ? '\r\n' : `Content-Length: ${body.length}\r\n\r\n${body}`);

async function exchange(
  pointPort: number,
  writes: (client: Socket, answered: Promise<unknown>) => Promise<void>,
): Promise<string> {
  const client = connect({ port: pointPort, host: '127.0.0.1' });
  closers.push(() => client.destroy());
  let text = '';
  const answered = new Promise((resolve) =>
    client.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes('\r\n\r\nok')) resolve(undefined);
    }),
  );
  await once(client, 'connect');
  await writes(client, answered);
  await Promise.race([once(client, 'close'), new Promise((r) => setTimeout(r, 3000))]);
  return text;
}

it('refuses a POST sent on the connection after its allowed GET was answered', async () => {
  const dest = await destination();
  const audit: NetworkAuditEvent[] = [];
  const text = await exchange(await policyPoint(audit), async (client, answered) => {
    client.write(request(dest.port, 'GET'));
    await answered;
    client.write(request(dest.port, 'POST', 'SECRET'));
  });
  expect(text).toMatch(/^HTTP\/1\.1 200 OK[\s\S]*\r\n\r\nok/);
  expect(text).toContain('403');
  expect(text).toContain('AgentFense network policy refused POST');
  expect(dest.received()).not.toContain('SECRET');
  expect(dest.received()).not.toContain('POST');
  expect(audit.map((e) => `${e.method ?? ''} ${e.decision}`)).toEqual(['GET allow', 'POST deny']);
});

it('never forwards a POST sent right behind the GET, before its answer', async () => {
  const dest = await destination();
  const audit: NetworkAuditEvent[] = [];
  const text = await exchange(await policyPoint(audit), async (client) => {
    client.write(request(dest.port, 'GET'));
    await new Promise((r) => setTimeout(r, 20));
    client.write(request(dest.port, 'POST', 'SECRET'));
  });
  expect(text).toMatch(/^HTTP\/1\.1 200 OK[\s\S]*\r\n\r\nok/);
  expect(dest.received()).not.toContain('SECRET');
  expect(dest.received()).not.toContain('POST');
  expect(audit.map((e) => `${e.method ?? ''} ${e.decision}`)).toEqual(['GET allow', 'POST deny']);
});
