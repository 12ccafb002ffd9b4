// The explicit proxy's first plain-HTTP request sent from C (packages/network/native/fast-http.c,
// fastHttp) against its JavaScript path: the same cases through a policy point with it off and one
// with it on, each in a policed namespace of its own, clients started inside it with nsenter and
// pointed at the proxy. What a user would check: an allowed name answers through the proxy, again and
// again; a denied one gets the 403 naming its rule; a request with a body is carried; a keep-alive
// connection's later requests are each decided (another, denied name on it gets its 403); a rule change
// refuses the next request; and each request's audit record carries the same fields either way. With
// it on, the GETs after the first to a name:port are sent by C (stats().fastHttp counts them).
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

/** curl through the explicit proxy; `-w` adds the answer's code; `extra` more arguments first. */
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
    '-x',
    'http://127.0.0.1:3128',
    '-w',
    ' %{http_code}\n',
    ...extra,
    ...urls,
  ]);

describeAgainstJavaScript(
  {
    tmpPrefix: 'af-fast-http-',
    cPath: 'the C plain-HTTP path',
    policy: POLICY,
    maxConnections: 8,
    features: ['fastHttp'],
    common: ['fastAccept'],
  },
  (p) => {
    it('reaches an allowed name through the proxy, again and again; audits each request', async () => {
      for (let i = 0; i < 3; i++) {
        expect((await curl(p.ns, [], `http://pub.test/n${i}?q=${i}`)).out).toBe(
          'hello from pub.test\n 200\n',
        );
      }
      expect(p.net.httpSeen.slice(-3)).toEqual([
        'GET pub.test /n0?q=0',
        'GET pub.test /n1?q=1',
        'GET pub.test /n2?q=2',
      ]);
      await until(() => p.audit.filter((e) => e.name === 'pub.test').length === 3, 'three records');
      for (const e of p.audit.filter((r) => r.name === 'pub.test')) {
        expect(decided(e)).toEqual({
          op: 'connect',
          path: 'pub.test:80',
          decision: 'allow',
          rule: 0,
          reason: 'rule 0 (allow pub.test ports 80)',
          name: 'pub.test',
          address: TEST_ADDRESSES.public,
          port: 80,
          method: 'GET',
          via: 'proxy',
        });
        expect(e.bytesDown).toBeGreaterThan(0);
      }
      // The first was decided by JavaScript; with the C path on, it sent the two after it.
      expect(p.point.stats().fastHttp).toBe(p.fast ? 2 : 0);
    });

    it('refuses a denied name with the 403 naming its rule, decided in JavaScript', async () => {
      const before = p.point.stats().fastHttp;
      const seen = p.net.httpSeen.length;
      const r = await curl(p.ns, [], 'http://other.test/');
      expect(r.out).toBe(
        'AgentFense network policy refused GET other.test: rule 1 (deny other.test)\n 403\n',
      );
      expect(p.net.httpSeen.slice(seen)).toEqual([]);
      expect(p.point.stats().fastHttp).toBe(before);
    });

    it('carries a request with a body and a HEAD, each decided; only a simple GET or HEAD is sent by C', async () => {
      const before = p.point.stats().fastHttp;
      const seen = p.net.httpSeen.length;
      expect((await curl(p.ns, ['-d', 'data'], 'http://pub.test/post')).out).toBe(
        'hello from pub.test\n 200\n',
      );
      expect((await curl(p.ns, ['-I', '-o', '/dev/null'], 'http://pub.test/head')).out).toBe(' 200\n');
      expect(p.net.httpSeen.slice(seen)).toEqual(['POST pub.test /post', 'HEAD pub.test /head']);
      expect(p.point.stats().fastHttp).toBe(p.fast ? before + 1 : 0); // the HEAD; the POST has a body
    });

    it('decides each request of a keep-alive connection: another, denied name on it gets its 403', async () => {
      const seen = p.net.httpSeen.length;
      const r = await curl(
        p.ns,
        [],
        'http://pub.test/first',
        'http://other.test/second',
        'http://pub.test/third',
      );
      expect(r.out).toBe(
        'hello from pub.test\n 200\n' +
          'AgentFense network policy refused GET other.test: rule 1 (deny other.test)\n 403\n' +
          'hello from pub.test\n 200\n',
      );
      expect(p.net.httpSeen.slice(seen)).toEqual(['GET pub.test /first', 'GET pub.test /third']);
    });

    it('a rule change refuses the next request (no stale decision)', async () => {
      expect((await curl(p.ns, [], 'http://pub.test/warm')).out).toBe('hello from pub.test\n 200\n');
      const before = p.point.stats().fastHttp;
      const seen = p.net.httpSeen.length;
      p.point.setPolicy({ mode: 'allow', rules: [{ action: 'deny', host: 'pub.test' }] });
      const r = await curl(p.ns, [], 'http://pub.test/after');
      expect(r.out).toBe('AgentFense network policy refused GET pub.test: rule 0 (deny pub.test)\n 403\n');
      expect(p.net.httpSeen.slice(seen)).toEqual([]);
      expect(p.point.stats().fastHttp).toBe(before);
      p.point.setPolicy(POLICY);
    });
  },
);
