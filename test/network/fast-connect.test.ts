// The explicit proxy's CONNECT in C (packages/network/native/fast-connect.c, fastConnect) against its
// JavaScript path: the same cases through a policy point with it off and one with it on, each in a
// policed namespace of its own, clients started inside it with nsenter and pointed at the proxy. What a
// user would check: an allowed name answers through the proxy, a denied one gets the 403 naming its
// rule, a tunnel whose TLS names no server is still carried (C hands it back to JavaScript after its
// 200), a rule change closes an open tunnel and refuses the next CONNECT, and each connection's audit
// record (via 'proxy', bytes each way) carries the same fields either way. With it on, the CONNECTs
// after the first to a name:port are carried by C (stats().fast counts them).
import { spawn } from 'node:child_process';
import { expect, it } from 'vitest';
import type { NetworkPolicy } from '../../packages/network/src/policy.js';
import { TEST_ADDRESSES } from '../helpers/test-net.js';
import { decided, inNs, until } from '../helpers/fast-path-point.js';
import { describeAgainstJavaScript } from '../helpers/fast-path-compare.js';

const POLICY: NetworkPolicy = {
  mode: 'allow',
  rules: [
    { action: 'allow', host: 'pub.test', ports: [443] },
    { action: 'deny', host: 'other.test' },
  ],
};

/** curl over TLS to `name` through the explicit proxy (CONNECT name:443); `-w` adds the proxy's code. */
const curl = (ns: string, name: string): Promise<{ out: string; code: number | null }> =>
  inNs(ns, [
    'curl',
    '-s',
    '-k',
    '-m',
    '5',
    '-x',
    'http://127.0.0.1:3128',
    '-w',
    '%{http_connect}',
    `https://${name}/`,
  ]);

/** Holds one CONNECT tunnel open: prints `open` once its TLS is up, then per `read` line what a read gets. */
const HOLDER = `
import socket, ssl, sys
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
s = socket.create_connection(('127.0.0.1', 3128), 5)
s.sendall(b'CONNECT pub.test:443 HTTP/1.1\\r\\nHost: pub.test:443\\r\\n\\r\\n')
answer = b''
while not answer.endswith(b'\\r\\n\\r\\n'):
    answer += s.recv(1)
held = ctx.wrap_socket(s, server_hostname='pub.test')
print('open', answer.split(b'\\r\\n')[0].decode(), flush=True)
for line in sys.stdin:
    held.settimeout(5)
    try:
        print('read', len(held.recv(100)), flush=True)
    except TimeoutError:
        print('read timeout', flush=True)
    except Exception as e:
        print('read failed', type(e).__name__, flush=True)
`;

function holder(ns: string) {
  const child = spawn('nsenter', [`--net=${ns}`, '--', 'python3', '-c', HOLDER], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  return {
    waitFor: async (pattern: RegExp): Promise<string> => {
      for (let i = 0; i < 200; i++) {
        const m = pattern.exec(out);
        if (m !== null) return m[0];
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error(`holder: no ${String(pattern)} in ${JSON.stringify(out)}`);
    },
    say: (line: string) => child.stdin.write(`${line}\n`),
    stop: () => {
      child.stdin.end();
      child.kill();
    },
  };
}

describeAgainstJavaScript(
  {
    tmpPrefix: 'af-fast-connect-',
    cPath: 'the C CONNECT path',
    policy: POLICY,
    maxConnections: 8,
    features: ['fastConnect'],
    common: ['fastAccept'],
  },
  (p) => {
    it('reaches an allowed name through the proxy, again and again; audits each tunnel with its bytes', async () => {
      for (let i = 0; i < 3; i++)
        expect((await curl(p.ns, 'pub.test')).out).toBe('tls hello from pub.test\n200');
      await until(() => p.audit.filter((e) => e.name === 'pub.test').length === 3, 'three records');
      for (const e of p.audit.filter((r) => r.name === 'pub.test')) {
        expect(decided(e)).toEqual({
          op: 'connect',
          path: 'pub.test:443',
          decision: 'allow',
          rule: 0,
          reason: 'rule 0 (allow pub.test ports 443)',
          name: 'pub.test',
          address: TEST_ADDRESSES.public,
          port: 443,
          via: 'proxy',
        });
        expect(e.bytesUp).toBeGreaterThan(300); // a ClientHello and a request
        expect(e.bytesDown).toBeGreaterThan(300); // a certificate and an answer
        expect(e.durationMs).toBeGreaterThanOrEqual(0);
      }
      // The first was decided by JavaScript; with the C path on, it carried the two after it.
      expect(p.point.stats().fast).toBe(p.fast ? 2 : 0);
    });

    it('decides a name it has no decision for in JavaScript: a denied one gets the 403 naming its rule', async () => {
      const before = p.point.stats().fast;
      const seen = p.net.sniSeen.length;
      const r = await curl(p.ns, 'other.test');
      expect(r.out).toBe('403');
      expect(p.net.sniSeen.slice(seen)).toEqual([]);
      await until(() => p.audit.some((e) => e.name === 'other.test'), 'the refusal');
      expect(p.audit.find((e) => e.name === 'other.test')).toMatchObject({
        decision: 'deny',
        rule: 1,
        reason: 'rule 1 (deny other.test)',
        via: 'proxy',
      });
      expect(p.point.stats().fast).toBe(before);
    });

    it('carries a tunnel whose TLS names no server as the JavaScript path does (C hands it back after its 200)', async () => {
      expect((await curl(p.ns, 'pub.test')).out).toBe('tls hello from pub.test\n200'); // decided: C may take the next
      const before = p.point.stats().fast;
      const noName = await inNs(p.ns, [
        'python3',
        '-c',
        `
import socket, ssl
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
s = socket.create_connection(('127.0.0.1', 3128), 5)
s.sendall(b'CONNECT pub.test:443 HTTP/1.1\\r\\nHost: pub.test:443\\r\\n\\r\\n')
answer = b''
while not answer.endswith(b'\\r\\n\\r\\n'):
    answer += s.recv(1)
t = ctx.wrap_socket(s)
t.sendall(b'GET / HTTP/1.1\\r\\nHost: pub.test\\r\\nConnection: close\\r\\n\\r\\n')
body = b''
while True:
    chunk = t.recv(4096)
    if not chunk: break
    body += chunk
print(body.split(b'\\r\\n\\r\\n', 1)[1].decode(), end='')
`,
      ]);
      expect(noName.out).toBe('tls hello from pub.test\n');
      expect(p.point.stats().fast).toBe(before); // not spliced by C: no name to match
      await until(() => p.audit.filter((e) => e.name === 'pub.test').length === 5, 'both records');
    });

    it('a rule change closes an open tunnel and refuses the next CONNECT (no stale decision)', async () => {
      const before = p.point.stats().fast;
      const h = holder(p.ns);
      try {
        expect(await h.waitFor(/open .*/)).toBe('open HTTP/1.1 200 Connection Established');
        if (p.fast) await until(() => p.point.stats().fast === before + 1, 'C to carry the tunnel');
        p.point.setPolicy({ mode: 'allow', rules: [{ action: 'deny', host: 'pub.test' }] });
        h.say('read');
        expect(await h.waitFor(/read (0|failed \w+)/)).toMatch(/^read (0|failed)/);
      } finally {
        h.stop();
      }
      expect((await curl(p.ns, 'pub.test')).out).toBe('403');
      await until(
        () => p.audit.some((e) => e.reason === 'closed by a policy change: rule 0 (deny pub.test)'),
        'the closing record',
      );
      await until(() => p.audit.some((e) => e.reason === 'rule 0 (deny pub.test)'), 'the refusal');
      expect(p.point.stats().fast).toBe(p.fast ? before + 1 : 0);
      p.point.setPolicy(POLICY);
    }, 30_000);
  },
);
