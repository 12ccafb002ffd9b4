// Attacks on the explicit proxy's plain HTTP sent from C (packages/network/native/fast-http.c,
// fastHttp): once a GET to a name:port was allowed, the next simple GET or HEAD there is sent to the
// address JavaScript chose from the relay's thread. A hostile agent warms that table with an allowed
// GET, then tries to ride it: a second request on the same keep-alive connection to a denied name (the
// destination here keeps connections open, as a cooperating server would), a method a `methods` rule
// refuses, and the allowed name right after a rule change refused it. Defences: C sends the first
// request alone and hands the connection to JavaScript, which decides every later request; no entry is
// made while any rule has methods; the table is emptied before a new policy applies.
import { expect, it } from 'vitest';
import type { NetworkPolicy } from '../../packages/network/src/policy.js';
import { inNs } from '../helpers/fast-path-point.js';
import { useAttackPoint } from '../helpers/fast-path-compare.js';

const PORT = 8081;
const POLICY: NetworkPolicy = {
  mode: 'allow',
  rules: [
    { action: 'allow', host: 'pub.test' },
    { action: 'deny', host: 'other.test' },
  ],
};

/**
 * One connection to the proxy carrying `requests` one after the other, each sent once the answer
 * before it was read (or the connection ended): prints each answer's status line, or `closed`.
 */
const exchange = async (ns: string, requests: string[]): Promise<string> =>
  (
    await inNs(ns, [
      'python3',
      '-c',
      `
import json, socket, sys
s = socket.create_connection(('127.0.0.1', 3128), 5)
s.settimeout(5)
for request in json.loads(sys.argv[1]):
    try:
        s.sendall(request.encode())
        data = b''
        while b'\\r\\n\\r\\n' not in data:
            chunk = s.recv(4096)
            if not chunk: break
            data += chunk
    except OSError:
        data = b''
    print(data.split(b'\\r\\n')[0].decode() if data else 'closed', flush=True)
`,
      JSON.stringify(requests),
    ])
  ).out;

const get = (name: string, path: string, method = 'GET'): string =>
  `${method} http://${name}:${PORT}${path} HTTP/1.1\r\nHost: ${name}:${PORT}\r\n\r\n`;

const at = useAttackPoint({
  tmpPrefix: 'af-fast-http-attack-',
  port: PORT,
  policy: POLICY,
  enable: ['fastAccept', 'fastHttp'],
});

it('refuses a second request to a denied name on the connection whose first request C sent', async () => {
  at.point.setPolicy(POLICY);
  expect(await exchange(at.ns, [get('pub.test', '/warm')])).toBe('HTTP/1.1 200 OK\n'); // decided in JavaScript
  const before = at.point.stats().fastHttp;
  at.destination.clear();
  const out = await exchange(at.ns, [get('pub.test', '/first'), get('other.test', '/secret')]);
  expect(at.destination.received).toContain('GET /first HTTP/1.1');
  expect(at.destination.received).not.toContain('other.test');
  expect(at.destination.received).not.toContain('/secret');
  expect(out).toBe('HTTP/1.1 200 OK\nHTTP/1.1 403 Forbidden\n');
  expect(at.point.stats().fastHttp).toBe(before + 1); // the first went from C
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
    expect(await exchange(at.ns, [get('pub.test', `/get${i}`)])).toBe('HTTP/1.1 200 OK\n');
  at.destination.clear();
  expect(await exchange(at.ns, [get('pub.test', '/head', 'HEAD')])).toBe('HTTP/1.1 403 Forbidden\n');
  expect(at.destination.received).toBe('');
});

it('refuses the allowed name right after a rule change denied it: nothing reaches the destination', async () => {
  at.point.setPolicy(POLICY);
  for (let i = 0; i < 2; i++)
    expect(await exchange(at.ns, [get('pub.test', `/warm${i}`)])).toBe('HTTP/1.1 200 OK\n');
  const before = at.point.stats().fastHttp;
  expect(before).toBeGreaterThan(0); // C holds a decision for pub.test
  at.point.setPolicy({ mode: 'allow', rules: [{ action: 'deny', host: 'pub.test' }] });
  at.destination.clear();
  expect(await exchange(at.ns, [get('pub.test', '/after')])).toBe('HTTP/1.1 403 Forbidden\n');
  expect(at.destination.received).toBe('');
});
