// Secrets without a sandbox: validation errors, the byte swap across chunk boundaries, and the
// interceptor between a TLS client trusting the sandbox CA and an HTTPS upstream on this machine.
import { once } from 'node:events';
import { createServer as createHttpsServer } from 'node:https';
import type { Server as HttpsServer } from 'node:https';
import { createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeafCertificates, createSandboxCa } from '../src/ca.js';
import type { NetworkAuditEvent } from '../src/audit.js';
import { FlowContext } from '../src/context.js';
import { Interceptor } from '../src/intercept.js';
import { Resolver } from '../src/resolver.js';
import { SecretSet } from '../src/secret-set.js';
import { validateSecrets, withPlaceholders } from '../src/secrets.js';
import { SwapStream, swapBytes } from '../src/swap.js';
import { readFirstBytes } from '../src/transparent.js';

const VALUE = 'sk-real-value-0123456789';

describe('secret validation', () => {
  it('names the bad secret and says how to fix it, never echoing a value', () => {
    expect(() => validateSecrets([{ name: 'A', hosts: ['api.test'], value: '' }])).toThrow(
      /secret 0 \(A\): has no value/,
    );
    expect(() => validateSecrets([{ name: 'A', hosts: [], value: 'x' }])).toThrow(
      /`hosts` must be a non-empty/,
    );
    expect(() => validateSecrets([{ name: 'A', hosts: ['a b'], value: 'x' }])).toThrow(
      /secret 0 \(A\).*not a host/,
    );
    let message = '';
    try {
      validateSecrets([{ name: 'A', hosts: ['api.test'], value: 'line\nbreak-secret' }]);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/line break/);
    expect(message).not.toContain('break-secret');
    expect(() =>
      validateSecrets([
        { name: 'A', hosts: ['a.test'], value: 'x' },
        { name: 'A', hosts: ['b.test'], value: 'y' },
      ]),
    ).toThrow(/declared twice/);
  });
});

describe('swap', () => {
  it('finds a token split across chunks, and none that is not whole', async () => {
    const swaps = [{ from: Buffer.from('af-secret-abc'), to: Buffer.from('REAL') }];
    const stream = new SwapStream(swaps);
    const out: Buffer[] = [];
    stream.on('data', (c: Buffer) => out.push(c));
    for (const part of ['x=af-sec', 'ret-a', 'bc&y=af-secret-ab', '&z=af-secret-abc']) stream.write(part);
    stream.end();
    await once(stream, 'end');
    expect(Buffer.concat(out).toString()).toBe('x=REAL&y=af-secret-ab&z=REAL');
    expect(swapBytes(Buffer.from('af-secret-abcaf-secret-abc'), swaps, true).out.toString()).toBe('REALREAL');
  });
});

describe('interceptor', () => {
  const upstreamCa = createSandboxCa({ sandboxId: 'upstream', hosts: ['api.test'] });
  const forgerCa = createSandboxCa({ sandboxId: 'forger', hosts: ['api.test'] });
  const sandboxCa = createSandboxCa({ sandboxId: 'sb_test', hosts: ['api.test'] });
  const seen: { headers: Record<string, unknown>; url: string; body: string }[] = [];
  const audit: NetworkAuditEvent[] = [];
  let upstream: HttpsServer;
  let forged: HttpsServer;
  let front: Server;
  let secret: ReturnType<typeof withPlaceholders>[number];

  const serve = async (ca: typeof upstreamCa): Promise<HttpsServer> => {
    const leaf = new LeafCertificates(ca).for('api.test');
    const server = createHttpsServer(leaf, (req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen.push({ headers: req.headers, url: req.url ?? '', body });
        res.end(`echo ${req.headers.authorization ?? ''}`);
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    return server;
  };

  beforeAll(async () => {
    upstream = await serve(upstreamCa);
    forged = await serve(forgerCa);
    const [made] = withPlaceholders(
      validateSecrets([{ name: 'API_KEY', hosts: ['api.test'], value: VALUE }]),
    );
    if (made === undefined) throw new Error('no secret');
    secret = made;
    const set = new SecretSet({ secrets: [secret], ca: sandboxCa, upstreamCa: upstreamCa.cert });
    const ctx = new FlowContext({
      policy: { mode: 'open', rules: [] },
      resolver: new Resolver({}),
      maxConnections: 10,
      audit: (e) => audit.push(e),
      secrets: set,
    });
    const interceptor = new Interceptor(ctx);
    // Stands for the proxy: the first line of each connection names the upstream's port.
    front = createServer({ pauseOnConnect: true }, (client: Socket) => {
      void readFirstBytes(client, 5_000).then(({ head }) => {
        const port = Number(process.env['AF_TEST_UPSTREAM_PORT']);
        const target = { name: 'api.test', address: '127.0.0.1', port };
        interceptor.take({
          set,
          client,
          head,
          target,
          via: 'proxy',
          decision: { allowed: true, reason: 'test' },
        });
      });
    });
    front.listen(0, '127.0.0.1');
    await once(front, 'listening');
  });
  afterAll(() => {
    upstream.close();
    forged.close();
    front.close();
  });

  const ask = async (port: number, request: string): Promise<string> => {
    process.env['AF_TEST_UPSTREAM_PORT'] = String(port);
    const socket = tlsConnect({
      host: '127.0.0.1',
      port: (front.address() as AddressInfo).port,
      servername: 'api.test',
      ca: sandboxCa.cert,
    });
    await once(socket, 'secureConnect');
    socket.write(request);
    let out = '';
    socket.on('data', (c: Buffer) => (out += c.toString()));
    await once(socket, 'close');
    return out;
  };

  it('puts the value in place of the placeholder in headers, URL and body; masks it coming back', async () => {
    const p = secret.placeholder;
    const body = `{"key":"${p}"}`;
    const port = (upstream.address() as AddressInfo).port;
    const out = await ask(
      port,
      `POST /v1/x?k=${p} HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer ${p}\r\nAccept-Encoding: gzip, br\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    const last = seen.at(-1);
    expect(last?.headers['authorization']).toBe(`Bearer ${VALUE}`);
    expect(last?.url).toBe(`/v1/x?k=${VALUE}`);
    expect(last?.body).toBe(`{"key":"${VALUE}"}`);
    // Asked uncompressed: an echo of the value comes back where the mask sees it.
    expect(last?.headers['accept-encoding']).toBe('identity');
    // The server echoed the real value: the client got the placeholder.
    expect(out).toContain(`echo Bearer ${p}`);
    expect(out).not.toContain(VALUE);
    expect(audit.filter((e) => e.op === 'secret')).toEqual([
      expect.objectContaining({ secret: 'API_KEY', name: 'api.test', method: 'POST' }),
    ]);
    expect(JSON.stringify(audit)).not.toContain(VALUE);
  });

  it('refuses an upstream whose certificate no trusted CA signed, and sends it nothing', async () => {
    const before = seen.length;
    const out = await ask(
      (forged.address() as AddressInfo).port,
      `GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer ${secret.placeholder}\r\nConnection: close\r\n\r\n`,
    );
    expect(out).toMatch(/^HTTP\/1.1 502/);
    expect(out).toMatch(/certificate/);
    expect(seen.length).toBe(before);
  });
});
