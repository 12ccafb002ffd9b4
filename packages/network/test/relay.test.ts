// Allowed tunnels, without a sandbox: a "policy point" on this machine accepts a client, dials a server
// and hands both to tunnel(), as the CONNECT and transparent paths do. Node pipes a tunnel first and the
// native relay takes it once it has carried HANDOVER_BYTES one way. What a user would check, before
// and after that hand-over: the bytes arrive exactly, half-close carries through, a rule change closes
// the connection, and the audit has the bytes each way.
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { NetworkAuditEvent } from '../src/audit.js';
import { FlowContext } from '../src/context.js';
import { Resolver } from '../src/resolver.js';
import { HANDOVER_BYTES, dial, tunnel } from '../src/tunnel.js';

const sha = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

/** Reads `socket` to its end. */
async function readAll(socket: Socket): Promise<Buffer> {
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  await once(socket, 'end');
  return Buffer.concat(chunks);
}

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

async function listen(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => server.close());
  return (server.address() as AddressInfo).port;
}

/** A policy point in miniature: every accepted client is tunnelled to `serverPort`. */
async function miniPolicyPoint(
  serverPort: number,
  head?: Buffer,
): Promise<{ port: number; ctx: FlowContext; audit: NetworkAuditEvent[]; handed: () => number }> {
  const audit: NetworkAuditEvent[] = [];
  const ctx = new FlowContext({
    policy: { mode: 'allow', rules: [{ action: 'allow', host: 'pub.test' }] },
    resolver: new Resolver(),
    maxConnections: 16,
    audit: (event) => audit.push(event),
  });
  // Counts the hand-overs to the native relay.
  let handed = 0;
  const relay = ctx.relay;
  if (relay !== undefined) {
    const handOver = relay.relay.bind(relay);
    relay.relay = (options) => (handed++, handOver(options));
  }
  const sockets: Socket[] = [];
  const server = createServer({ pauseOnConnect: true, allowHalfOpen: true }, (client) => {
    sockets.push(client);
    const upstream = dial('127.0.0.1', serverPort);
    sockets.push(upstream);
    tunnel({
      ctx,
      client,
      upstream,
      // What was decided (tunnel() itself decides nothing): a name a rule allows.
      dest: { name: 'pub.test', address: '203.0.113.10', port: 443 },
      via: 'proxy',
      decision: { allowed: true, rule: 0, reason: 'rule 0 (allow pub.test)' },
      ...(head === undefined ? {} : { head }),
    });
  });
  const port = await listen(server);
  closers.push(() => sockets.forEach((s) => s.destroy()));
  return { port, ctx, audit, handed: () => handed };
}

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 25));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

describe('the native relay', () => {
  it('is the one in use here (built by pnpm build)', async () => {
    const { ctx } = await miniPolicyPoint(1);
    expect(ctx.relay).toBeDefined();
  });

  it('relays large bodies both ways exactly, and audits the bytes each way', async () => {
    const up = randomBytes(24 * 1024 * 1024);
    const down = randomBytes(40 * 1024 * 1024);
    const head = Buffer.from('first bytes read while deciding\n');
    let serverGot = '';
    const server = createServer({ allowHalfOpen: true }, (socket) => {
      socket.on('error', () => socket.destroy()); // a failed run's clean-up closes it mid-write
      socket.write(down); // speaks at once, while it reads: both directions run together
      void readAll(socket).then((data) => {
        serverGot = sha(data);
        socket.end();
      });
    });
    const { port, ctx, audit, handed } = await miniPolicyPoint(await listen(server), head);
    const client = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    closers.push(() => client.destroy());
    const received = readAll(client);
    client.end(up);
    expect(sha(await received)).toBe(sha(down));
    await until(() => audit.length === 1, 'the audit record');
    expect(serverGot).toBe(sha(Buffer.concat([head, up])));
    expect(audit[0]).toMatchObject({
      decision: 'allow',
      name: 'pub.test',
      bytesUp: head.length + up.length,
      bytesDown: down.length,
    });
    expect(handed()).toBe(1);
    expect(ctx.relay?.size).toBe(0);
    expect(ctx.clients.size).toBe(0);
  }, 60_000);

  it('keeps a short exchange in Node: no hand-over, the bytes exact and audited', async () => {
    const server = createServer((socket) => socket.on('data', (chunk) => socket.end(chunk)));
    const { port, audit, handed } = await miniPolicyPoint(await listen(server));
    const client = connect({ port, host: '127.0.0.1' });
    closers.push(() => client.destroy());
    const answer = readAll(client);
    client.write('ping');
    expect((await answer).toString()).toBe('ping');
    await until(() => audit.length === 1, 'the audit record');
    expect(audit[0]).toMatchObject({ bytesUp: 4, bytesDown: 4 });
    expect(handed()).toBe(0);
  });

  it('hands a transfer across the threshold over mid-way: exact both ways, audited exactly', async () => {
    // Just past the threshold one way, then more each way after the hand-over.
    const up = randomBytes(HANDOVER_BYTES + 100_003);
    const down = randomBytes(3 * HANDOVER_BYTES + 7);
    let serverGot = '';
    const server = createServer({ allowHalfOpen: true }, (socket) => {
      socket.on('error', () => socket.destroy());
      void readAll(socket).then((data) => {
        serverGot = sha(data);
        socket.end(down);
      });
    });
    const { port, ctx, audit, handed } = await miniPolicyPoint(await listen(server));
    const client = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    closers.push(() => client.destroy());
    const received = readAll(client);
    client.end(up);
    expect(sha(await received)).toBe(sha(down));
    await until(() => audit.length === 1, 'the audit record');
    expect(serverGot).toBe(sha(up));
    expect(audit[0]).toMatchObject({ bytesUp: up.length, bytesDown: down.length });
    expect(handed()).toBe(1);
    expect(ctx.relay?.size).toBe(0);
    expect(ctx.clients.size).toBe(0);
  });

  for (const after of [false, true]) {
    it(`carries a half-close ${after ? 'after' : 'before'} the hand-over: the client ends its request and still reads the answer`, async () => {
      const server = createServer({ allowHalfOpen: true }, (socket) => {
        // Answers only after the client's end of input: the length of what it sent.
        void readAll(socket).then((data) => socket.end(`got ${data.length} bytes`));
      });
      const { port, ctx, audit, handed } = await miniPolicyPoint(await listen(server));
      const client = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
      closers.push(() => client.destroy());
      await once(client, 'connect');
      const answer = readAll(client);
      const sent = after ? HANDOVER_BYTES + 1000 : 1000;
      client.write('x'.repeat(sent));
      if (after) await until(() => ctx.relay?.size === 1, 'the hand-over');
      else await new Promise((r) => setTimeout(r, 100));
      client.end();
      expect((await answer).toString()).toBe(`got ${sent} bytes`);
      await until(() => audit.length === 1, 'the audit record');
      expect(audit[0]).toMatchObject({ bytesUp: sent, bytesDown: `got ${sent} bytes`.length });
      expect(handed()).toBe(after ? 1 : 0);
    });

    it(`closes a connection that a live rule change refuses ${after ? 'after' : 'before'} the hand-over, and audits it`, async () => {
      let got = 0;
      const server = createServer((socket) => socket.on('data', (chunk) => (got += chunk.length)));
      const { port, ctx, audit, handed } = await miniPolicyPoint(await listen(server));
      const client = connect({ port, host: '127.0.0.1' });
      closers.push(() => client.destroy());
      await once(client, 'connect');
      const sent = after ? HANDOVER_BYTES : 5;
      client.write(Buffer.alloc(sent, 1));
      await until(() => got === sent, 'the bytes at the server');
      expect(ctx.relay?.size).toBe(after ? 1 : 0);
      const closed = once(client, 'close');
      expect(ctx.setPolicy({ mode: 'allow', rules: [{ action: 'deny', host: 'pub.test' }] })).toBe(1);
      await closed;
      await until(() => audit.length === 2, 'both audit records');
      expect(audit[0]?.reason).toMatch(/^closed by a policy change: rule 0 \(deny pub.test\)/);
      expect(audit[1]).toMatchObject({ decision: 'allow', bytesUp: sent });
      expect(handed()).toBe(after ? 1 : 0);
      expect(ctx.relay?.size).toBe(0);
      expect(ctx.open.size).toBe(0);
    });
  }
});
