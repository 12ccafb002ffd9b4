// Attacks on a redirected connection's plain HTTP sent from C (packages/network/native/fast.c peeks it,
// native/fast-http.c sends it; fastTransparentHttp): once a GET whose Host named a name was allowed at
// the address and port the agent dialled, the next simple GET or HEAD with that Host dialled there is
// sent from the relay's thread. A hostile agent warms that table with an allowed GET, then tries to
// ride it: a second request on the same keep-alive connection naming a denied Host (the destination
// here keeps connections open, as a cooperating server would), the allowed Host sent to another address
// (Host spoofing), a method a `methods` rule refuses, the allowed name right after a rule change refused
// it, and heads C must not read as a whole request (a body, Expect, Upgrade). Defences: C sends the
// first request alone and hands the connection to JavaScript, which decides every later request by its
// Host at the dialled address; an entry matches name, dialled address and port exactly; no entry is
// made while any rule has methods; the table is emptied before a new policy applies; only a head
// without a body, Expect or Upgrade is taken.
import { expect, it } from 'vitest';
import type { NetworkPolicy } from '../../packages/network/src/policy.js';
import { TEST_ADDRESSES } from '../helpers/test-net.js';
import { inNs } from '../helpers/fast-path-point.js';
import { useAttackPoint } from '../helpers/fast-path-compare.js';

const PORT = 8082;
const POLICY: NetworkPolicy = {
  mode: 'allow',
  rules: [
    { action: 'allow', host: 'pub.test' },
    { action: 'deny', host: 'other.test' },
  ],
};

/**
 * One connection dialled to `address`:PORT (redirected) carrying `requests` one after the other, each
 * sent once the answer before it was read (or the connection ended): prints each answer's status line
 * (and the line of its body that names a refusal's reason), or `closed`.
 */
const exchange = async (ns: string, address: string, requests: string[]): Promise<string> =>
  (
    await inNs(ns, [
      'python3',
      '-c',
      `
import json, socket, sys
s = socket.create_connection((sys.argv[2], ${PORT}), 5)
s.settimeout(5)
for request in json.loads(sys.argv[1]):
    try:
        s.sendall(request.encode())
        data = b''
        while b'\\r\\n\\r\\n' not in data:
            chunk = s.recv(4096)
            if not chunk: break
            data += chunk
        while data.startswith(b'HTTP/1.1 403'):
            chunk = s.recv(4096)
            if not chunk: break
            data += chunk
    except OSError:
        data = b''
    line = data.split(b'\\r\\n')[0].decode() if data else 'closed'
    said = [l for l in data.split(b'\\r\\n') if l.startswith(b'AgentFense')]
    print(' '.join([line] + [l.decode().strip() for l in said]), flush=True)
`,
      JSON.stringify(requests),
      address,
    ])
  ).out;

const get = (name: string, path: string, method = 'GET', extra = ''): string =>
  `${method} ${path} HTTP/1.1\r\nHost: ${name}:${PORT}\r\n${extra}\r\n`;
const OK = 'HTTP/1.1 200 OK\n';

/** Two allowed GETs: the first decided in JavaScript, the second sent from C. */
async function warm(): Promise<void> {
  const before = at.point.stats().fastTransparentHttp;
  for (let i = 0; i < 2; i++)
    expect(await exchange(at.ns, TEST_ADDRESSES.public, [get('pub.test', `/warm${i}`)])).toBe(OK);
  expect(at.point.stats().fastTransparentHttp).toBe(before + 1); // C holds a decision for pub.test here
}

const at = useAttackPoint({
  tmpPrefix: 'af-fast-thttp-attack-',
  port: PORT,
  policy: POLICY,
  enable: ['fastAccept', 'fastTransparentHttp'],
});

it('refuses a second request naming a denied Host on the connection whose first request C sent', async () => {
  at.point.setPolicy(POLICY);
  await warm();
  const before = at.point.stats().fastTransparentHttp;
  at.destination.clear();
  const out = await exchange(at.ns, TEST_ADDRESSES.public, [
    get('pub.test', '/first'),
    get('other.test', '/secret'),
  ]);
  expect(at.destination.received).toContain('GET /first HTTP/1.1');
  expect(at.destination.received).not.toContain('other.test');
  expect(at.destination.received).not.toContain('/secret');
  expect(out).toBe(
    `${OK}HTTP/1.1 403 Forbidden AgentFense network policy refused GET other.test: rule 1 (deny other.test)\n`,
  );
  expect(at.point.stats().fastTransparentHttp).toBe(before + 1); // the first went from C
});

it('refuses the allowed Host dialled at another address (Host spoofing): nothing reaches it', async () => {
  at.point.setPolicy(POLICY);
  await warm();
  at.destination.clear();
  const out = await exchange(at.ns, TEST_ADDRESSES.evil, [get('pub.test', '/spoof')]);
  expect(out).toBe(
    `HTTP/1.1 403 Forbidden AgentFense network policy refused GET pub.test: pub.test does not resolve to ${TEST_ADDRESSES.evil}, the address dialled\n`,
  );
  expect(at.destination.received).toBe('');
});

it('applies a methods rule: a HEAD it refuses is not sent, however many GETs went before', async () => {
  at.point.setPolicy({
    mode: 'allow',
    rules: [
      { action: 'allow', host: 'pub.test' },
      { action: 'deny', host: 'pub.test', methods: ['HEAD'] },
    ],
  });
  for (let i = 0; i < 2; i++)
    expect(await exchange(at.ns, TEST_ADDRESSES.public, [get('pub.test', `/get${i}`)])).toBe(OK);
  at.destination.clear();
  const out = await exchange(at.ns, TEST_ADDRESSES.public, [get('pub.test', '/head', 'HEAD')]);
  expect(out).toBe(
    'HTTP/1.1 403 Forbidden\n', // a HEAD's answer has no body
  );
  expect(at.destination.received).toBe('');
});

it('refuses the allowed name right after a rule change denied it: nothing reaches the destination', async () => {
  at.point.setPolicy(POLICY);
  await warm();
  at.point.setPolicy({ mode: 'allow', rules: [{ action: 'deny', host: 'pub.test' }] });
  at.destination.clear();
  const out = await exchange(at.ns, TEST_ADDRESSES.public, [get('pub.test', '/after')]);
  expect(out).toBe(
    'HTTP/1.1 403 Forbidden AgentFense network policy refused GET pub.test: rule 0 (deny pub.test)\n',
  );
  expect(at.destination.received).toBe('');
});

it('leaves a head with a body, an Expect or an Upgrade to JavaScript, which decides and carries it', async () => {
  at.point.setPolicy(POLICY);
  await warm();
  const before = at.point.stats().fastTransparentHttp;
  at.destination.clear();
  const heads = [
    `${get('pub.test', '/body', 'GET', 'Content-Length: 4\r\n')}data`,
    get('pub.test', '/expect', 'GET', 'Expect: 100-continue\r\n'),
    get('pub.test', '/upgrade', 'GET', 'Connection: Upgrade\r\nUpgrade: websocket\r\n'),
  ];
  for (const head of heads) {
    const out = await exchange(at.ns, TEST_ADDRESSES.public, [head]);
    expect(`${head.split(' ')[1]} ${out}`).toMatch(/ HTTP\/1\.1 (200 OK|100 Continue)\n$/);
  }
  for (const path of ['/body', '/expect', '/upgrade'])
    expect(at.destination.received).toContain(`GET ${path} HTTP/1.1`);
  expect(at.point.stats().fastTransparentHttp).toBe(before); // none was sent from C
});
