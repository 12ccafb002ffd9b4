// A redirected connection's first plain-HTTP request sent from C (packages/network/native/fast.c peeks
// it, native/fast-http.c reads and sends it; fastTransparentHttp) against its JavaScript path: the same
// cases through a policy point with it off and one with it on, each in a policed namespace of its own,
// clients started inside it with nsenter and no proxy (the NAT redirects them). What a user would
// check: an allowed name answers, again and again, GET and HEAD; a denied one gets the 403 naming its
// rule; a request with a body is carried; a rule change refuses the next request; and each request's
// audit record carries the same fields either way. With it on, the simple requests after the first to a
// name at an address and port are sent by C (stats().fastTransparentHttp counts them).
import { expect, it } from 'vitest';
import type { NetworkPolicy } from '../../packages/network/src/policy.js';
import { TEST_ADDRESSES } from '../helpers/test-net.js';
import { decided, inNs, until } from '../helpers/fast-path-point.js';
import { describeAgainstJavaScript } from '../helpers/fast-path-compare.js';

const POLICY: NetworkPolicy = {
  mode: 'allow',
  rules: [
    { action: 'allow', host: 'pub.test', ports: [80] },
    { action: 'deny', host: 'other.test' },
  ],
};

/** curl without the proxy (redirected), each name dialled at the test hosts' public address. */
const curl = (
  ns: string,
  extra: string[],
  ...urls: string[]
): Promise<{ out: string; code: number | null }> =>
  inNs(ns, [
    'curl',
    '-s',
    '-m',
    '5',
    '--noproxy',
    '*',
    '--resolve',
    `pub.test:80:${TEST_ADDRESSES.public}`,
    '--resolve',
    `other.test:80:${TEST_ADDRESSES.public}`,
    '-w',
    ' %{http_code}\n',
    ...extra,
    ...urls,
  ]);

describeAgainstJavaScript(
  {
    tmpPrefix: 'af-fast-thttp-',
    cPath: 'the C transparent plain-HTTP path',
    policy: POLICY,
    maxConnections: 8,
    features: ['fastTransparentHttp'],
    common: ['fastAccept'],
  },
  (p) => {
    it('reaches an allowed name, again and again, GET and HEAD; audits each request', async () => {
      for (let i = 0; i < 3; i++) {
        expect((await curl(p.ns, [], `http://pub.test/n${i}?q=${i}`)).out).toBe(
          'hello from pub.test\n 200\n',
        );
      }
      expect((await curl(p.ns, ['-I', '-o', '/dev/null'], 'http://pub.test/head')).out).toBe(' 200\n');
      expect(p.net.httpSeen.slice(-4)).toEqual([
        'GET pub.test /n0?q=0',
        'GET pub.test /n1?q=1',
        'GET pub.test /n2?q=2',
        'HEAD pub.test /head',
      ]);
      await until(() => p.audit.filter((e) => e.name === 'pub.test').length === 4, 'four records');
      for (const [i, e] of p.audit.filter((r) => r.name === 'pub.test').entries()) {
        expect(decided(e)).toEqual({
          op: 'connect',
          path: 'pub.test:80',
          decision: 'allow',
          rule: 0,
          reason: 'rule 0 (allow pub.test ports 80)',
          name: 'pub.test',
          address: TEST_ADDRESSES.public,
          port: 80,
          method: i < 3 ? 'GET' : 'HEAD',
          via: 'transparent',
        });
        if (i < 3) expect(e.bytesDown).toBeGreaterThan(0);
      }
      // The first was decided by JavaScript; with the C path on, it sent the three after it.
      expect(p.point.stats().fastTransparentHttp).toBe(p.fast ? 3 : 0);
      expect(p.point.stats().fastHttp).toBe(0);
    });

    it('refuses a denied name at the same address with the 403 naming its rule', async () => {
      const before = p.point.stats().fastTransparentHttp;
      const seen = p.net.httpSeen.length;
      const r = await curl(p.ns, [], 'http://other.test/');
      expect(r.out).toBe(
        'AgentFense network policy refused GET other.test: rule 1 (deny other.test)\n 403\n',
      );
      expect(p.net.httpSeen.slice(seen)).toEqual([]);
      expect(p.point.stats().fastTransparentHttp).toBe(before);
    });

    it('carries a request with a body in JavaScript, decided', async () => {
      const before = p.point.stats().fastTransparentHttp;
      const seen = p.net.httpSeen.length;
      expect((await curl(p.ns, ['-d', 'data'], 'http://pub.test/post')).out).toBe(
        'hello from pub.test\n 200\n',
      );
      expect(p.net.httpSeen.slice(seen)).toEqual(['POST pub.test /post']);
      expect(p.point.stats().fastTransparentHttp).toBe(before);
    });

    it('a rule change refuses the next request (no stale decision)', async () => {
      expect((await curl(p.ns, [], 'http://pub.test/warm')).out).toBe('hello from pub.test\n 200\n');
      const before = p.point.stats().fastTransparentHttp;
      const seen = p.net.httpSeen.length;
      p.point.setPolicy({ mode: 'allow', rules: [{ action: 'deny', host: 'pub.test' }] });
      const r = await curl(p.ns, [], 'http://pub.test/after');
      expect(r.out).toBe('AgentFense network policy refused GET pub.test: rule 0 (deny pub.test)\n 403\n');
      expect(p.net.httpSeen.slice(seen)).toEqual([]);
      expect(p.point.stats().fastTransparentHttp).toBe(before);
      p.point.setPolicy(POLICY);
    });
  },
);
