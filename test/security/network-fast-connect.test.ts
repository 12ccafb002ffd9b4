// Attacks on the explicit proxy's CONNECT in C (packages/network/native/fast-connect.c, fastConnect):
// once a CONNECT to a name:port was allowed, later ones to it are dialled at the address JavaScript
// chose and spliced in C. A hostile agent warms that table with an allowed CONNECT, then tries to ride
// it: another server name inside an allowed tunnel (SNI spoofing), the allowed name at another port,
// and the allowed name after its resolver answer expired and it now points at the host's loopback
// (DNS rebinding). Defences: the tunnel is spliced only when its ClientHello names the CONNECT's own
// name (anything else goes back to JavaScript, which decides the name it claims); an entry is looked up
// by name and port exactly; an entry lives no longer than the resolver holds the name at its address.
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { NetworkAuditEvent } from '@agentfense/network';
import { PolicyPoint } from '../../packages/network/src/policy-point.js';
import { removeSandboxNetns, setUpSandboxNetns } from '../../packages/network/src/netns.js';
import { Resolver } from '../../packages/network/src/resolver.js';
import { TEST_ADDRESSES, makeTestNet } from '../helpers/test-net.js';
import type { TestNet } from '../helpers/test-net.js';

/** The test hosts file, and rebind.test answered as the test says, held for as long as it says. */
class RebindingResolver extends Resolver {
  answer = { addresses: [TEST_ADDRESSES.public] as string[], until: 0 };

  override async resolve(name: string): Promise<string[]> {
    return name === 'rebind.test' ? this.answer.addresses : super.resolve(name);
  }

  override knownUntil(name: string, address: string): number {
    if (name !== 'rebind.test') return super.knownUntil(name, address);
    return this.answer.addresses.includes(address) ? this.answer.until : 0;
  }
}

/** A client inside `ns`. */
function inNs(ns: string, argv: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('nsenter', [`--net=${ns}`, '--', ...argv], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('close', () => resolve(out));
  });
}

/** curl over TLS to `name`:`port` through the explicit proxy; the proxy's answer code last. */
const curl = (ns: string, name: string, port = 443): Promise<string> =>
  inNs(ns, [
    'curl',
    ...['-s', '-k', '-m', '5', '-x', 'http://127.0.0.1:3128', '-w', '%{http_connect}'],
    `https://${name}:${port}/`,
  ]);

/** CONNECT `authority`, then a TLS handshake inside the tunnel naming `sni`: what came of each. */
const spoof = (ns: string, authority: string, sni: string): Promise<string> =>
  inNs(ns, [
    'python3',
    '-c',
    `
import socket, ssl
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
s = socket.create_connection(('127.0.0.1', 3128), 5)
s.sendall(b'CONNECT ${authority} HTTP/1.1\\r\\nHost: ${authority}\\r\\n\\r\\n')
answer = b''
while not answer.endswith(b'\\r\\n\\r\\n'):
    answer += s.recv(1)
print(answer.split(b'\\r\\n')[0].decode())
try:
    t = ctx.wrap_socket(s, server_hostname='${sni}')
    t.sendall(b'GET / HTTP/1.1\\r\\nHost: ${sni}\\r\\n\\r\\n')
    print('answered', t.recv(100))
except OSError:
    print('refused')
`,
  ]);

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 25));
  if (!check()) throw new Error(`timed out waiting for ${what}`);
}

let net: TestNet;
let dir: string;
let ns: string;
let point: PolicyPoint;
let resolver: RebindingResolver;
const audit: NetworkAuditEvent[] = [];

beforeAll(async () => {
  net = await makeTestNet();
  dir = await mkdtemp(join(tmpdir(), 'af-fast-connect-attack-'));
  ns = join(dir, 'ns');
  await setUpSandboxNetns(ns, { create: true });
  resolver = new RebindingResolver({ hostsFile: net.hostsFile });
  const saved = [process.env.AGENTFENSE_NETWORK_ENABLE, process.env.AGENTFENSE_NETWORK_DISABLE];
  process.env.AGENTFENSE_NETWORK_ENABLE = 'fastAccept,fastConnect';
  delete process.env.AGENTFENSE_NETWORK_DISABLE;
  try {
    point = new PolicyPoint({
      netnsPath: ns,
      policy: {
        mode: 'allow',
        rules: [
          { action: 'allow', host: 'pub.test', ports: [443] },
          { action: 'allow', host: 'rebind.test', ports: [443] },
        ],
      },
      maxConnections: 8,
      resolver,
      audit: (event) => audit.push(event),
    });
  } finally {
    if (saved[0] === undefined) delete process.env.AGENTFENSE_NETWORK_ENABLE;
    else process.env.AGENTFENSE_NETWORK_ENABLE = saved[0];
    if (saved[1] !== undefined) process.env.AGENTFENSE_NETWORK_DISABLE = saved[1];
  }
}, 60_000);
afterAll(async () => {
  point.close();
  await removeSandboxNetns(ns);
  await net.close();
  await rm(dir, { recursive: true, force: true });
});

it('another server name inside an allowed CONNECT tunnel is refused, not spliced', async () => {
  // Warm the table: the first is decided in JavaScript, the second is carried by C.
  expect(await curl(ns, 'pub.test')).toBe('tls hello from pub.test\n200');
  expect(await curl(ns, 'pub.test')).toBe('tls hello from pub.test\n200');
  expect(point.stats().fast).toBe(1);
  const seen = net.sniSeen.length;
  expect(await spoof(ns, 'pub.test:443', 'evil.test')).toBe('HTTP/1.1 200 Connection Established\nrefused\n');
  expect(net.sniSeen.slice(seen)).toEqual([]); // its ClientHello reached no server
  expect(point.stats().fast).toBe(1);
  await until(() => audit.some((e) => e.name === 'evil.test'), 'the refusal');
  expect(audit.find((e) => e.name === 'evil.test')).toMatchObject({
    decision: 'deny',
    address: TEST_ADDRESSES.public,
    port: 443,
    via: 'proxy',
  });
});

it('the allowed name at a port it was not allowed on is decided again, and refused', async () => {
  expect(await curl(ns, 'pub.test')).toBe('tls hello from pub.test\n200'); // remembered for 443
  const carried = point.stats().fast;
  expect(await curl(ns, 'pub.test', 8443)).toBe('403');
  expect(point.stats().fast).toBe(carried);
  await until(() => audit.some((e) => e.port === 8443), 'the refusal');
  expect(audit.find((e) => e.port === 8443)).toMatchObject({
    decision: 'deny',
    name: 'pub.test',
    via: 'proxy',
  });
});

it('a name whose answer expired and now points at the host loopback is refused, not dialled at its old address', async () => {
  resolver.answer = { addresses: [TEST_ADDRESSES.public], until: Date.now() + 3_000 };
  expect(await curl(ns, 'rebind.test')).toBe('tls hello from rebind.test\n200');
  const before = point.stats().fast;
  expect(await curl(ns, 'rebind.test')).toBe('tls hello from rebind.test\n200');
  expect(point.stats().fast).toBe(before + 1); // remembered: carried by C
  // The attacker's DNS now answers the host's loopback, once the old answer ran out.
  resolver.answer = { addresses: ['127.0.0.1'], until: Date.now() + 60_000 };
  await new Promise((r) => setTimeout(r, 3_500));
  const seen = net.sniSeen.length;
  expect(await curl(ns, 'rebind.test')).toBe('403');
  expect(net.sniSeen.slice(seen)).toEqual([]);
  expect(point.stats().fast).toBe(before + 1);
  await until(() => audit.some((e) => e.name === 'rebind.test' && e.decision === 'deny'), 'the refusal');
  const refused = audit.find((e) => e.name === 'rebind.test' && e.decision === 'deny');
  expect(refused).toMatchObject({ address: '127.0.0.1', via: 'proxy' });
  expect(refused?.reason).toMatch(/^127\.0\.0\.1 is the host itself/);
}, 30_000);
