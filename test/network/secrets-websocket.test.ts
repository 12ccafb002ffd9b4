// A WebSocket upgrade to a bound host (docs/secrets.md): the placeholder in the upgrade request's
// headers and URL reaches the real host as the value, the 101 comes back to the agent with the value
// masked, and the bytes after it flow both ways (they are not searched). A bound host that compresses
// its answer against Accept-Encoding: identity has it decoded and masked all the same.
import { createServer } from 'node:https';
import type { Server } from 'node:https';
import { gzipSync } from 'node:zlib';
import { openSocketInNetns } from '@agentfense/network';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useNetworkFixture } from '../helpers/network-fixture.js';
import { makeTestCerts, serveHttps } from '../helpers/secret-hosts.js';

const VALUE = 'sk-ws-REAL-0f9e8d7c6b5a49382716';
const POLICY = { mode: 'allow', rules: [{ action: 'allow', host: 'pub.test' }] } as const;
const certs = makeTestCerts();

describe('secrets: WebSocket upgrades', () => {
  const fx = useNetworkFixture({ upstreamCa: certs.ca });
  let server: Server;
  const upgrades: { authorization: string; url: string }[] = [];
  beforeAll(() => {
    ({ server } = serveHttps(fx().net.nsPath, 8443, certs.leaf));
    server.on('upgrade', (req: { headers: { authorization?: string }; url?: string }, socket) => {
      const authorization = req.headers.authorization ?? '';
      upgrades.push({ authorization, url: req.url ?? '' });
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Seen: ${authorization}\r\n\r\n`,
      );
      socket.end('frames-after-upgrade\n');
    });
  });
  afterAll(() => server.close());

  it('an upgrade with the placeholder reaches the host with the value; the 101 and its bytes come back', async () => {
    const sb = await fx().sandbox(POLICY, {
      secrets: [{ name: 'API_KEY', hosts: ['pub.test'], value: VALUE }],
    });
    const r = await sb.run(
      [
        'curl -sS -m 10 -i -N --http1.1',
        '-H "Connection: Upgrade" -H "Upgrade: websocket" -H "Sec-WebSocket-Version: 13"',
        '-H "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="',
        '-H "Authorization: Bearer $API_KEY" "https://pub.test:8443/ws?key=$API_KEY"',
        '; printf "|%s" "$API_KEY"',
      ].join(' '),
    );
    const placeholder = r.out.slice(r.out.lastIndexOf('|') + 1);
    expect(placeholder).toMatch(/^af-secret-[0-9a-f]{32}$/);
    expect(upgrades).toEqual([{ authorization: `Bearer ${VALUE}`, url: `/ws?key=${VALUE}` }]);
    // After the proxy's own answer to curl's CONNECT, the host's 101.
    expect(r.out).toContain('\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n');
    // The host's echo of the value in the 101's headers comes back as the placeholder.
    expect(r.out).toContain(`X-Seen: Bearer ${placeholder}\r\n`);
    expect(r.out).toContain('frames-after-upgrade\n');
    expect(r.out).not.toContain(VALUE);
    const uses = (await fx().cp.audit(sb.id, { kind: 'network' })).filter((e) => e.op === 'secret');
    expect(uses).toEqual([expect.objectContaining({ secret: 'API_KEY', method: 'GET' })]);
  });
});

describe('secrets: a bound host that compresses anyway', () => {
  const fx = useNetworkFixture({ upstreamCa: certs.ca });
  let server: Server;
  beforeAll(() => {
    // Compresses whatever the request asked for (the policy point asks for identity).
    server = createServer(certs.leaf, (req, res) => {
      res.writeHead(200, { 'content-encoding': 'gzip', 'content-type': 'text/plain' });
      res.end(gzipSync(`echo ${req.headers.authorization ?? ''}\n`));
    });
    server.listen({
      fd: openSocketInNetns(fx().net.nsPath, { family: 4, type: 'tcp', address: '0.0.0.0', port: 8444 }),
    });
  });
  afterAll(() => server.close());

  it('its body is decoded, masked and sent on uncompressed', async () => {
    const sb = await fx().sandbox(POLICY, {
      secrets: [{ name: 'API_KEY', hosts: ['pub.test'], value: VALUE }],
    });
    const r = await sb.run(
      'curl -sS -m 10 --compressed -H "Authorization: Bearer $API_KEY" https://pub.test:8444/gz; printf "|%s" "$API_KEY"',
    );
    const placeholder = r.out.slice(r.out.lastIndexOf('|') + 1);
    expect(r.err).toBe('');
    expect(r.out).toBe(`echo Bearer ${placeholder}\n|${placeholder}`);
  });
});
