// The network policy as a user relies on it (bwrap): what the rules allow works through the proxy
// variables (curl, Python, git) and without them (Node's fetch, a raw socket), each connection is in
// the audit trail with its rule and byte counts, a live change closes what it no longer allows, and the
// CLI's options and `explain --host` say the same. Test hosts: test/helpers/test-net.ts.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { controlPlaneBackend, createHttpServer } from '@agentfense/control';
import { useNetworkFixture } from '../helpers/network-fixture.js';
import { TEST_ADDRESSES } from '../helpers/test-net.js';

const BIN = fileURLToPath(new URL('../../packages/control/bin/agentfense.js', import.meta.url));
const ALLOW_PUB = { mode: 'allow', rules: [{ action: 'allow', host: 'pub.test' }] } as const;

describe('network policy', () => {
  const fx = useNetworkFixture();

  it('reaches an allowed name through the proxy variables: curl (HTTP and HTTPS), Python, git', async () => {
    const sb = await fx().sandbox(ALLOW_PUB);
    const r = await sb.run(
      [
        'curl -s -m 5 http://pub.test/a',
        'curl -s -m 5 -k https://pub.test/b',
        `python3 -c "import urllib.request; print(urllib.request.urlopen('http://pub.test/c', timeout=5).read().decode().strip())"`,
        'git ls-remote http://pub.test/repo.git >/dev/null 2>&1; echo "git $?"',
      ].join('; '),
    );
    expect(r.out.split('\n')).toEqual([
      'hello from pub.test',
      'tls hello from pub.test',
      'hello from pub.test',
      expect.stringMatching(/^git \d+$/),
      '',
    ]);
    // git asked the server (it got a 404 there: no repository, but the request went through the proxy).
    expect(fx().net.httpSeen).toContain('GET pub.test /repo.git/info/refs?service=git-upload-pack');
    const records = await fx().cp.audit(sb.id, { kind: 'network' });
    expect(records.filter((e) => e.via === 'proxy' && e.decision === 'allow').length).toBeGreaterThanOrEqual(
      4,
    );
  });

  it('polices programs that ignore the proxy variables: Node fetch and a raw socket', async () => {
    const sb = await fx().sandbox(ALLOW_PUB);
    const r = await sb.run(
      [
        `node -e "fetch('http://pub.test/d').then(async (r) => console.log(r.status, (await r.text()).trim()))"`,
        `node -e "fetch('http://evil.test/').then((r) => console.log(r.status)).catch((e) => console.log('refused', e.cause.code))"`,
        `python3 -c "
import socket
s = socket.create_connection(('pub.test', 7), 5); s.sendall(b'ping'); print(s.recv(4).decode())"`,
      ].join('; '),
    );
    expect(r.out.split('\n')).toEqual(['200 hello from pub.test', 'refused ENOTFOUND', 'ping', '']);
    const records = await fx().cp.audit(sb.id, { kind: 'network' });
    const echo = records.find((e) => e.port === 7);
    expect(echo).toMatchObject({ decision: 'allow', rule: 0, name: 'pub.test', via: 'transparent' });
    expect(echo?.bytesUp).toBe(4);
    expect(echo?.bytesDown).toBe(4);
  });

  it('sends a redirected request on the connection dialled at accept only once the request is allowed', async () => {
    const sb = await fx().sandbox(ALLOW_PUB);
    // curl resolves pub.test through the sandbox's DNS, so its address alone is allowed and dialled at
    // accept; a request whose Host is refused must not go out on that connection, an allowed one does.
    const r = await sb.run(
      [
        `curl -s -m 5 --noproxy '*' -o /dev/null -w '%{http_code}\\n' -H 'Host: evil.test' http://pub.test/early-spoof`,
        `curl -s -m 5 --noproxy '*' http://pub.test/early-ok`,
      ].join('; '),
    );
    expect(r.out).toBe('403\nhello from pub.test\n');
    expect(fx().net.httpSeen).toContain('GET pub.test /early-ok');
    expect(fx().net.httpSeen.some((line) => line.includes('/early-spoof'))).toBe(false);
    const records = await fx().cp.audit(sb.id, { kind: 'network' });
    const ok = records.find((e) => e.via === 'transparent' && e.decision === 'allow' && e.port === 80);
    expect(ok).toMatchObject({ name: 'pub.test', method: 'GET' });
    expect(ok?.bytesDown).toBeGreaterThan(0);
  });

  it('mode open reaches a public-range address, not a private one', async () => {
    const sb = await fx().sandbox(true);
    const r = await sb.run(
      `curl -s -m 5 http://pub.test/; curl -s -m 5 -o /dev/null -w "%{http_code}" --noproxy '*' http://${TEST_ADDRESSES.private}/; echo " $?"`,
    );
    expect(r.out).toMatch(/^hello from pub.test\n(000 \d+|403 0)\n$/);
  });

  it('a live policy change closes a connection the new policy refuses', async () => {
    const sb = await fx().sandbox(ALLOW_PUB);
    const held = sb.run(
      `python3 -c "
import socket, time
s = socket.create_connection(('pub.test', 7), 5); s.settimeout(2)
for i in range(200):
    try:
        s.sendall(b'x')
        if s.recv(1) != b'x': break
    except OSError:
        break
    time.sleep(0.05)
print('ended after', i)"`,
      60_000,
    );
    await sleep(1_000);
    await fx().cp.setNetwork(sb.id, { mode: 'allow', rules: [{ action: 'allow', host: 'other.test' }] });
    const r = await held;
    expect(Number(r.out.trim().split(' ').at(-1))).toBeLessThan(150);
    const closed = await fx().cp.audit(sb.id, { kind: 'network', decision: 'deny' });
    expect(closed.some((e) => e.port === 7 && /closed by a policy change/.test(e.reason))).toBe(true);
    expect((await fx().cp.getSandbox(sb.id)).networkPolicy.rules).toEqual([
      { action: 'allow', host: 'other.test' },
    ]);
  });

  it('the HTTP face: create with network_policy, read the records, replace the policy', async () => {
    // The fixture's codebase is linked locally: this backend serves it as `agentfense mcp` on stdio does.
    const server = createHttpServer({
      backend: controlPlaneBackend(fx().cp, { localCodebases: true }),
      insecureNoAuth: true,
    });
    try {
      const codebaseId = (await fx().cp.listCodebases())[0]?.id ?? '';
      const created = await server.app.inject({
        method: 'POST',
        url: '/v1/sandboxes',
        payload: {
          codebase_id: codebaseId,
          start: true,
          network_policy: { rules: [{ action: 'allow', host: 'pub.test', ports: [80] }] },
        },
      });
      expect(created.statusCode).toBe(200);
      const sandbox = created.json<{ id: string; network: boolean; networkPolicy: unknown }>();
      expect(sandbox.network).toBe(true);
      expect(sandbox.networkPolicy).toEqual({
        mode: 'allow',
        rules: [{ action: 'allow', host: 'pub.test', ports: [80] }],
      });
      const r = await fx().cp.run(
        sandbox.id,
        'curl -s -m 5 http://pub.test/; curl -s -m 5 http://other.test/',
      );
      expect(r.stdout).toContain('hello from pub.test');
      const audit = await server.app.inject({
        method: 'GET',
        url: `/v1/sandboxes/${sandbox.id}/network/audit`,
      });
      const records = audit.json<{ records: { path: string; decision: string; bytesDown?: number }[] }>()
        .records;
      expect(records.map((e) => `${e.decision} ${e.path}`)).toEqual([
        'allow pub.test:80',
        'deny other.test:80',
      ]);
      expect(records[0]?.bytesDown).toBeGreaterThan(0);
      const bad = await server.app.inject({
        method: 'PUT',
        url: `/v1/sandboxes/${sandbox.id}/network`,
        payload: { mode: 'allow', rules: [{ action: 'allow', host: 'a b' }] },
      });
      expect(bad.statusCode).toBe(400);
      expect(bad.json<{ message: string }>().message).toContain('network rule 0: "a b" is not a host name');
      const replaced = await server.app.inject({
        method: 'PUT',
        url: `/v1/sandboxes/${sandbox.id}/network`,
        payload: { mode: 'none' },
      });
      expect(replaced.json<{ network: boolean }>().network).toBe(false);
      const after = await fx().cp.run(sandbox.id, 'curl -s -m 5 http://pub.test/; echo " $?"');
      expect(after.stdout).not.toContain('hello');
    } finally {
      await server.app.close();
    }
  });

  it('the CLI: run with --allow-host, audit --network, explain --host', async () => {
    const env = { ...process.env, AGENTFENSE_NETWORK_HOSTS: fx().net.hostsFile, AGENTFENSE_RUN_HELPER: '0' };
    const data = await mkdtemp(join(tmpdir(), 'af-net-cli-'));
    try {
      const ran = await execa(
        'node',
        [
          BIN,
          'run',
          fx().dirs.repo,
          '--data',
          data,
          '--allow-host',
          'pub.test:80',
          '--keep',
          '--',
          'sh',
          '-c',
          'curl -s -m 5 http://pub.test/; curl -s -m 5 -k https://pub.test/; echo "https $?"',
        ],
        { env, reject: false },
      );
      expect(ran.stdout).toContain('hello from pub.test');
      // curl reports a refused CONNECT (403) as exit status 56.
      expect(ran.stdout).toContain('https 56');
      const id = /kept sandbox (sb_\S+)/.exec(ran.stderr)?.[1] ?? '';
      const audit = await execa('node', [BIN, 'audit', id, '--network', '--data', data, '--json'], { env });
      const records = JSON.parse(audit.stdout) as { path: string; decision: string }[];
      expect(records.map((e) => `${e.decision} ${e.path}`)).toEqual(
        expect.arrayContaining(['allow pub.test:80', 'deny pub.test:443']),
      );
      // A kept (stopped) sandbox's policy is replaced for its next start.
      const replaced = await execa(
        'node',
        [BIN, 'sandbox', 'network', id, '--data', data, '--allow-host', 'pub.test:443'],
        { env },
      );
      expect(replaced.stdout).toMatch(/network\s+allow; allow pub\.test ports 443/);
      await execa('node', [BIN, 'sandbox', 'destroy', id, '--data', data], { env });
    } finally {
      await rm(data, { recursive: true, force: true });
    }
    const explained = await execa('node', [
      BIN,
      'explain',
      '--host',
      'api.openai.com',
      '--host',
      'evil.example:443',
      '--network-preset',
      'model-apis',
      '--json',
    ]);
    expect(JSON.parse(explained.stdout)).toMatchObject([
      { host: 'api.openai.com', port: 443, decision: { allowed: true }, resolves: true },
      { host: 'evil.example', port: 443, decision: { allowed: false }, resolves: false },
    ]);
  });
});
