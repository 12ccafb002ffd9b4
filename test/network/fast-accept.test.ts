// The policy point's accept path in C (packages/network/native/fast.c) against its JavaScript path: the
// same cases through a policy point with it off (AGENTFENSE_NETWORK_DISABLE=fastAccept) and one with it
// on (the default), each in a policed namespace of its own, clients started inside it with nsenter. What a
// user would check: an allowed name answers, a denied one and a spoofed one (an allowed name sent to
// another address) do not, a rule change closes an open connection and refuses the next, the bound
// holds and frees, and each connection's audit record carries the same fields either way. With it on,
// the connections after the first to a name are carried by C (stats().fast counts them).
import { spawn } from 'node:child_process';
import { expect, it } from 'vitest';
import type { NetworkPolicy } from '../../packages/network/src/policy.js';
import { TEST_ADDRESSES } from '../helpers/test-net.js';
import { decided, inNs, until } from '../helpers/fast-path-point.js';
import { describeAgainstJavaScript } from '../helpers/fast-path-compare.js';

const MAX = 4;
const POLICY: NetworkPolicy = {
  mode: 'allow',
  rules: [
    { action: 'allow', host: 'pub.test', ports: [443] },
    { action: 'deny', host: 'other.test' },
  ],
};

/** curl over TLS to `name` at `address` (transparently: no proxy in the namespace). */
const curl = (ns: string, name: string, address: string): Promise<{ out: string; code: number | null }> =>
  inNs(ns, ['curl', '-s', '-k', '-m', '5', '--resolve', `${name}:443:${address}`, `https://${name}/`]);

/** Holds TLS connections open: prints `open N` once N are, then per line read, what happens next. */
const HOLDER = `
import socket, ssl, sys
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
def tls():
    s = socket.create_connection(('${TEST_ADDRESSES.public}', 443), 5)
    return ctx.wrap_socket(s, server_hostname='pub.test')
held = [tls() for _ in range(int(sys.argv[1]))]
print('open', len(held), flush=True)
for line in sys.stdin:
    if line.strip() == 'one-more':
        try:
            tls().sendall(b'GET / HTTP/1.1\\r\\nHost: pub.test\\r\\n\\r\\n'); print('one-more ok', flush=True)
        except Exception as e:
            print('one-more refused', flush=True)
    elif line.strip() == 'read':
        held[0].settimeout(5)
        try:
            print('read', len(held[0].recv(100)), flush=True)
        except TimeoutError:
            print('read timeout', flush=True)
        except Exception as e:
            print('read failed', type(e).__name__, flush=True)
`;

/** A holder process in `ns`, spoken to line by line. */
function holder(ns: string, count: number) {
  const child = spawn('nsenter', [`--net=${ns}`, '--', 'python3', '-c', HOLDER, String(count)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const waitFor = async (pattern: RegExp): Promise<string> => {
    for (let i = 0; i < 200; i++) {
      const m = pattern.exec(out);
      if (m !== null) return m[0];
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`holder: no ${String(pattern)} in ${JSON.stringify(out)}`);
  };
  return {
    waitFor,
    say: (line: string) => child.stdin.write(`${line}\n`),
    stop: () => {
      child.stdin.end();
      child.kill();
    },
  };
}

describeAgainstJavaScript(
  {
    tmpPrefix: 'af-fast-accept-',
    cPath: 'the C accept path',
    policy: POLICY,
    maxConnections: MAX,
    features: ['fastAccept'],
    common: [],
  },
  (p) => {
    it('reaches an allowed name, again and again; audits each connection with its bytes', async () => {
      for (let i = 0; i < 3; i++)
        expect((await curl(p.ns, 'pub.test', TEST_ADDRESSES.public)).out).toBe('tls hello from pub.test\n');
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
          via: 'transparent',
        });
        expect(e.bytesUp).toBeGreaterThan(300); // a ClientHello and a request
        expect(e.bytesDown).toBeGreaterThan(300); // a certificate and an answer
        expect(e.durationMs).toBeGreaterThanOrEqual(0);
        expect(Math.abs(e.time - Date.now())).toBeLessThan(30_000);
      }
      // The first was decided by JavaScript; with the C path on, it carried the two after it.
      expect(p.point.stats().fast).toBe(p.fast ? 2 : 0);
    });

    it('refuses a denied name and an allowed name sent to another address (SNI spoofing)', async () => {
      const seen = p.net.sniSeen.length;
      expect((await curl(p.ns, 'other.test', TEST_ADDRESSES.public)).out).toBe('');
      expect((await curl(p.ns, 'pub.test', TEST_ADDRESSES.evil)).out).toBe('');
      expect(p.net.sniSeen.slice(seen)).toEqual([]);
      await until(() => p.audit.filter((e) => e.decision === 'deny').length === 2, 'two refusals');
      const [denied, spoofed] = p.audit.filter((e) => e.decision === 'deny');
      expect(denied).toMatchObject({ path: 'other.test:443', rule: 1, reason: 'rule 1 (deny other.test)' });
      expect(spoofed).toMatchObject({
        path: 'pub.test:443',
        address: TEST_ADDRESSES.evil,
        reason: `pub.test does not resolve to ${TEST_ADDRESSES.evil}, the address dialled`,
      });
    });

    it('holds the bound: the one past it is refused and audited, and a freed slot takes the next', async () => {
      const h = holder(p.ns, MAX);
      try {
        await h.waitFor(/open 4/);
        h.say('one-more');
        await h.waitFor(/one-more (ok|refused)/);
        expect(await h.waitFor(/one-more \w+/)).toBe('one-more refused');
        await until(() => p.audit.some((e) => /already has 4 connections open/.test(e.reason)), 'the bound');
      } finally {
        h.stop();
      }
      // The held ones end; their slots are free again.
      await until(() => p.point.stats().clients === 0, 'the slots freed');
      expect((await curl(p.ns, 'pub.test', TEST_ADDRESSES.public)).out).toBe('tls hello from pub.test\n');
    }, 30_000);

    it('a rule change closes an open connection and refuses the next one (no stale decision)', async () => {
      const before = p.point.stats().fast;
      const h = holder(p.ns, 1);
      try {
        await h.waitFor(/open 1/);
        if (p.fast) expect(p.point.stats().fast).toBe(before + 1);
        p.point.setPolicy({ mode: 'allow', rules: [{ action: 'deny', host: 'pub.test' }] });
        h.say('read');
        expect(await h.waitFor(/read (0|failed \w+)/)).toMatch(/^read (0|failed)/);
      } finally {
        h.stop();
      }
      expect((await curl(p.ns, 'pub.test', TEST_ADDRESSES.public)).out).toBe('');
      await until(
        () => p.audit.some((e) => e.reason === 'closed by a policy change: rule 0 (deny pub.test)'),
        'the closing record',
      );
      await until(() => p.audit.some((e) => e.reason === 'rule 0 (deny pub.test)'), 'the refusal');
      p.point.setPolicy(POLICY);
    }, 30_000);
  },
);
