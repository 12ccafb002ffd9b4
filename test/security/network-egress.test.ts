// The network policy under attack (bwrap). With the network on, a sandbox used to share the host's
// network namespace: it reached `agentfense serve` on the host's loopback (and through it every codebase
// and hidden file), the host's abstract Unix sockets and /proc/net/unix. Now every sandbox has a
// namespace of its own whose only way out is its policy point; each test below fails without one of its
// defences: the namespace, the address classes, the name-to-address check, DNS answered by the policy
// point, the NAT's refusal of other protocols, the connection bound.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it, onTestFinished } from 'vitest';
import { useNetworkFixture } from '../helpers/network-fixture.js';
import { TEST_ADDRESSES } from '../helpers/test-net.js';

const CURL = 'curl -s -S -m 5 -o /dev/null -w "%{http_code}"';

/** A server on the host that must never see a connection from a sandbox. */
async function hostServer(address: string): Promise<{ port: number; hits: () => number }> {
  let hits = 0;
  const server = createServer((_req, res) => {
    hits += 1;
    res.end('{"codebases":[{"id":"cb_secret"}]}');
  });
  await new Promise<void>((resolve) => server.listen(0, address, resolve));
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: (server.address() as AddressInfo).port, hits: () => hits };
}

describe('network policy attacks', () => {
  const fx = useNetworkFixture({ maxConnections: 8 });

  it("never reaches the host's loopback (an unauthenticated serve API there) nor the host's own addresses, in any mode", async () => {
    const api = await hostServer('127.0.0.1');
    const wide = await hostServer('0.0.0.0');
    const open = await fx().sandbox({ mode: 'open', rules: [{ action: 'allow', cidr: '127.0.0.0/8' }] });
    const allow = await fx().sandbox({
      mode: 'allow',
      rules: [
        { action: 'allow', cidr: '10.231.0.0/24' },
        { action: 'allow', host: 'host.test' },
      ],
    });
    for (const sb of [open, allow]) {
      // Through the proxy, without it, by the host's veth address and by a name that resolves to it.
      const r = await sb.run(
        [
          `${CURL} http://127.0.0.1:${api.port}/v1/codebases; echo " $?"`,
          `${CURL} --noproxy '*' http://127.0.0.1:${api.port}/v1/codebases; echo " $?"`,
          `${CURL} http://${TEST_ADDRESSES.hostPrivate}:${wide.port}/; echo " $?"`,
          `${CURL} --noproxy '*' http://${TEST_ADDRESSES.hostPrivate}:${wide.port}/; echo " $?"`,
          `${CURL} http://host.test:${wide.port}/; echo " $?"`,
        ].join('; '),
      );
      expect(r.out).not.toMatch(/^200/m);
      expect(api.hits()).toBe(0);
      expect(wide.hits()).toBe(0);
    }
    const refused = await fx().cp.audit(allow.id, { kind: 'network', decision: 'deny' });
    expect(
      refused.some((e) => e.address === TEST_ADDRESSES.hostPrivate && /host itself/.test(e.reason)),
    ).toBe(true);
  });

  it('refuses the cloud metadata address and private ranges unless a CIDR rule names them', async () => {
    const sb = await fx().sandbox({ mode: 'open' });
    const r = await sb.run(
      [
        `${CURL} http://169.254.169.254/latest/meta-data/; echo " $?"`,
        `${CURL} --noproxy '*' http://${TEST_ADDRESSES.private}/; echo " $?"`,
        `${CURL} http://priv.test/; echo " $?"`,
        `${CURL} http://pub.test/; echo " $?"`,
      ].join('; '),
    );
    const lines = r.out.trim().split('\n');
    expect(lines[0]).toMatch(/^403 0$/);
    expect(lines[1]).not.toMatch(/^200/);
    expect(lines[2]).toMatch(/^403 0$/);
    expect(lines[3]).toBe('200 0'); // a public-range address in mode open
    expect(
      fx().net.httpSeen.filter((l) => l.includes('priv.test') || l.includes(TEST_ADDRESSES.private)),
    ).toEqual([]);
    const named = await fx().sandbox({ mode: 'open', rules: [{ action: 'allow', cidr: '10.231.0.0/24' }] });
    expect((await named.run(`${CURL} http://priv.test/`)).out).toBe('200');
  });

  it('refuses a denied name, a denied port and a literal address no rule allows, each with its rule in the 403 and the audit', async () => {
    const sb = await fx().sandbox({
      mode: 'allow',
      rules: [
        { action: 'allow', host: 'pub.test', ports: [443] },
        { action: 'allow', host: 'other.test' },
        { action: 'deny', host: 'other.test', ports: [80] },
      ],
    });
    const r = await sb.run(
      [
        'curl -s -m 5 http://pub.test/', // port 80 not allowed
        'curl -s -m 5 http://other.test/', // denied on port 80
        `curl -s -m 5 --noproxy '*' http://${TEST_ADDRESSES.evil}/`, // no name, no rule
        `curl -s -m 5 -k https://pub.test/`, // allowed
      ].join('; echo; '),
    );
    expect(r.out).toContain('refused GET pub.test: no rule allows it');
    expect(r.out).toContain('refused GET other.test: rule 2 (deny other.test ports 80)');
    expect(r.out).toContain('tls hello from pub.test');
    const denied = await fx().cp.audit(sb.id, { kind: 'network', decision: 'deny' });
    expect(denied.map((e) => e.path)).toEqual(
      expect.arrayContaining(['pub.test:80', 'other.test:80', `${TEST_ADDRESSES.evil}:80`]),
    );
    expect(denied.find((e) => e.path === 'other.test:80')?.rule).toBe(2);
  });

  it('a denied range holds whatever spelling of the address is dialled (IPv4-mapped IPv6)', async () => {
    const sb = await fx().sandbox({ mode: 'open', rules: [{ action: 'deny', cidr: '203.0.113.0/24' }] });
    const r = await sb.run(
      [
        `${CURL} http://[::ffff:${TEST_ADDRESSES.public}]/; echo " $?"`,
        `${CURL} http://[::ffff:cb00:710a]/; echo " $?"`,
        `${CURL} http://${TEST_ADDRESSES.public}/; echo " $?"`,
      ].join('; '),
    );
    expect(r.out).toBe('403 0\n403 0\n403 0\n');
  });

  it('refuses TLS server names and HTTP Hosts that do not belong to the address dialled, both ways', async () => {
    const sb = await fx().sandbox({ mode: 'allow', rules: [{ action: 'allow', host: 'pub.test' }] });
    const before = fx().net.sniSeen.length;
    // An allowed name sent to another host's address.
    const spoofTls = await sb.run(
      `curl -s -m 5 -k --noproxy '*' --resolve pub.test:443:${TEST_ADDRESSES.evil} https://pub.test/; echo " $?"`,
    );
    expect(spoofTls.out).toBe(' 35\n'); // TLS connect error: reset before any handshake
    const spoofHost = await sb.run(
      `curl -s -m 5 --noproxy '*' -H 'Host: pub.test' http://${TEST_ADDRESSES.evil}/`,
    );
    expect(spoofHost.out).toContain('pub.test does not resolve to 203.0.113.20');
    // A denied name sent to an allowed host's address (fronting), directly and inside a CONNECT tunnel.
    const fronted = await sb.run(
      `curl -s -m 5 -k --noproxy '*' --resolve evil.test:443:${TEST_ADDRESSES.public} https://evil.test/; echo " $?"`,
    );
    expect(fronted.out).toBe(' 35\n');
    const tunnelled = await sb.run(`python3 -c "
import socket, ssl
s = socket.create_connection(('127.0.0.1', 3128), 5)
s.sendall(b'CONNECT pub.test:443 HTTP/1.1\\r\\nHost: pub.test:443\\r\\n\\r\\n')
print(s.recv(100).split(b'\\r\\n')[0].decode())
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
try:
    ctx.wrap_socket(s, server_hostname='evil.test').sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); print('reached')
except Exception as e:
    print('refused', type(e).__name__)
"`);
    expect(tunnelled.out.trim().split('\n')).toEqual([
      'HTTP/1.1 200 Connection Established',
      expect.stringMatching(/^refused/),
    ]);
    // No handshake reached a server under a spoofed or denied name.
    expect(fx().net.sniSeen.slice(before)).toEqual([]);
  });

  it('answers DNS itself: a denied name is NXDOMAIN, an allowed one only with allowed addresses', async () => {
    const sb = await fx().sandbox({ mode: 'allow', rules: [{ action: 'allow', host: 'pub.test' }] });
    const r = await sb.run(
      'getent hosts pub.test; echo "rc=$?"; getent hosts evil.test; echo "rc=$?"; getent hosts priv.test; echo "rc=$?"',
    );
    expect(r.out.split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^${TEST_ADDRESSES.public.replaceAll('.', '\\.')}\\s+pub\\.test$`)),
      'rc=0',
      'rc=2',
      'rc=2',
      '',
    ]);
    // Queries sent to any resolver address land at the policy point too.
    const direct = await sb.run(
      `python3 -c "
import socket, struct
q = struct.pack('>HHHHHH', 7, 0x100, 1, 0, 0, 0) + b'\\x04evil\\x04test\\x00' + struct.pack('>HH', 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5); s.sendto(q, ('8.8.8.8', 53))
print('rcode', s.recv(512)[3] & 15)"`,
    );
    expect(direct.out.trim()).toBe('rcode 3');
    const dns = (await fx().cp.audit(sb.id, { kind: 'network' })).filter((e) => e.op === 'dns');
    expect(dns.map((e) => e.path)).toEqual(expect.arrayContaining(['evil.test', 'priv.test']));
    // Refused as a name, before any resolution (a query is itself a way out), not resolved and filtered.
    expect(dns.find((e) => e.path === 'evil.test')?.reason).toBe('no rule allows the name (mode allow)');
  });

  it('refuses UDP other than DNS and shows nothing of the host in /proc/net/unix', async () => {
    const sb = await fx().sandbox({ mode: 'open' });
    const r = await sb.run(
      `python3 -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(b'x', ('${TEST_ADDRESSES.public}', 9)); print('sent')
except OSError as e:
    print('refused', e.errno)
"; wc -l < /proc/net/unix`,
    );
    expect(r.out.trim().split('\n')).toEqual([expect.stringMatching(/^refused/), '1']);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(fx().net.udpSeen()).toBe(0);
  });

  it('bounds the connections one sandbox may hold open, and says so: in the audit and to a proxy client', async () => {
    const sb = await fx().sandbox({ mode: 'open' });
    // While 8 are held, a client of the explicit proxy gets a 503 naming the bound and how to raise it.
    const r = await sb.run(
      `python3 -c "
import socket, subprocess
sockets, answered = [], 0
for i in range(12):
    s = socket.create_connection(('${TEST_ADDRESSES.public}', 7), 5); s.settimeout(2)
    sockets.append(s)
    try:
        s.sendall(b'x'); answered += s.recv(1) == b'x'
    except OSError:
        pass
print(answered)
curl = subprocess.run(['curl', '-s', '-m', '5', '-w', ' %{http_code}', 'http://pub.test/'], capture_output=True, text=True)
print(curl.stdout)"`,
    );
    const [answered, ...proxied] = r.out.trim().split('\n');
    expect(Number(answered)).toBe(8);
    expect(proxied.join('\n')).toMatch(
      /8 connections open \(its limit\).*AGENTFENSE_NETWORK_MAX_CONNECTIONS.* 503$/s,
    );
    const denied = await fx().cp.audit(sb.id, { kind: 'network', decision: 'deny' });
    expect(
      denied.some((e) => /8 connections open \(its limit\).*network\.maxConnections/.test(e.reason)),
    ).toBe(true);
  });
});
