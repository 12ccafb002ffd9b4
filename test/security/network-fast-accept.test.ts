// Attacks on the policy point's accept path in C (packages/network/native/fast.c, on by default; off
// with AGENTFENSE_NETWORK_DISABLE=fastAccept): once a name was allowed at an address, later TLS connections
// to it start in C from a table of JavaScript's decisions. A hostile agent warms that table with an
// allowed connection, then tries to ride it: the allowed name sent to another address (SNI spoofing),
// a denied name sent to the warmed address (fronting), the same name after a rule change refused it,
// and more connections than the sandbox's bound. Defences: a table entry matches name, address and
// port exactly; a policy change empties the table before the new rules apply, and a connection the C
// path started is in the policy point's connection table, closed like any other; the bound is counted
// on the C path's thread for every connection, whichever path carries it.
import { describe, expect, it } from 'vitest';
import { useNetworkFixture } from '../helpers/network-fixture.js';
import { TEST_ADDRESSES } from '../helpers/test-net.js';

// Read by each policy point the control plane forks (its environment is this process's): on whatever
// the default or the caller's environment says.
process.env.AGENTFENSE_NETWORK_ENABLE = 'fastAccept';
delete process.env.AGENTFENSE_NETWORK_DISABLE;

/** curl over TLS without the proxy variables: the NAT redirects it (the transparent path). */
const tls = (name: string, address: string): string =>
  `curl -s -m 5 -k --noproxy '*' --resolve ${name}:443:${address} https://${name}/; echo " $?"`;

describe('the C accept path under attack', () => {
  const fx = useNetworkFixture({ maxConnections: 8 });

  it('an allowed name already carried by C is still refused at another address, and a denied name at its address', async () => {
    const sb = await fx().sandbox({ mode: 'allow', rules: [{ action: 'allow', host: 'pub.test' }] });
    // Warm the table: the first is decided in JavaScript, the second starts in C.
    const warm = await sb.run(
      [tls('pub.test', TEST_ADDRESSES.public), tls('pub.test', TEST_ADDRESSES.public)].join('; '),
    );
    expect(warm.out).toBe('tls hello from pub.test\n 0\ntls hello from pub.test\n 0\n');
    const before = fx().net.sniSeen.length;
    const r = await sb.run(
      [tls('pub.test', TEST_ADDRESSES.evil), tls('evil.test', TEST_ADDRESSES.public)].join('; '),
    );
    expect(r.out).toBe(' 35\n 35\n'); // reset before any handshake
    expect(fx().net.sniSeen.slice(before)).toEqual([]);
    const denied = await fx().cp.audit(sb.id, { kind: 'network', decision: 'deny' });
    expect(denied.map((e) => e.reason)).toEqual(
      expect.arrayContaining([`pub.test does not resolve to ${TEST_ADDRESSES.evil}, the address dialled`]),
    );
  });

  it('a rule change closes what C carries and C does not start the refused name again', async () => {
    const sb = await fx().sandbox({ mode: 'allow', rules: [{ action: 'allow', host: 'pub.test' }] });
    const held = sb.run(
      `${tls('pub.test', TEST_ADDRESSES.public)}; python3 -c "
import socket, ssl, time
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
s = ctx.wrap_socket(socket.create_connection(('${TEST_ADDRESSES.public}', 443), 5), server_hostname='pub.test')
s.settimeout(8); start = time.time()
try:
    print('read', len(s.recv(100)), round(time.time() - start))
except TimeoutError:
    print('still open')
except OSError as e:
    print('read failed', round(time.time() - start))
"`,
    );
    await new Promise((r) => setTimeout(r, 1_500)); // the held connection is open
    await fx().cp.setNetwork(sb.id, { mode: 'allow', rules: [{ action: 'deny', host: 'pub.test' }] });
    const out = (await held).out.trim().split('\n');
    expect(out[0]).toBe('tls hello from pub.test');
    expect(out[2]).toMatch(/^read (0|failed) [0-2]$/); // closed by the change, not left open
    const seen = fx().net.sniSeen.length;
    const after = await sb.run(tls('pub.test', TEST_ADDRESSES.public));
    expect(after.out).toBe(' 35\n');
    expect(fx().net.sniSeen.slice(seen)).toEqual([]); // its ClientHello reached no server
    const denied = await fx().cp.audit(sb.id, { kind: 'network', decision: 'deny' });
    expect(denied.map((e) => e.reason)).toEqual(
      expect.arrayContaining(['closed by a policy change: rule 0 (deny pub.test)', 'rule 0 (deny pub.test)']),
    );
  }, 60_000);

  it('more TLS connections than the bound, all to a name C carries: the bound holds, and says so', async () => {
    const sb = await fx().sandbox({ mode: 'allow', rules: [{ action: 'allow', host: 'pub.test' }] });
    const r = await sb.run(
      `${tls('pub.test', TEST_ADDRESSES.public)}; python3 -c "
import socket, ssl
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
held = []
for i in range(12):
    try:
        s = ctx.wrap_socket(socket.create_connection(('${TEST_ADDRESSES.public}', 443), 5), server_hostname='pub.test')
        held.append(s)
    except OSError:
        pass
print(len(held))
"`,
    );
    expect(r.out.trim().split('\n')).toEqual(['tls hello from pub.test', ' 0', '8']);
    const denied = await fx().cp.audit(sb.id, { kind: 'network', decision: 'deny' });
    expect(denied.filter((e) => /8 connections open \(its limit\)/.test(e.reason)).length).toBe(4);
  }, 60_000);
});
