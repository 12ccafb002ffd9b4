// Secrets as a user relies on them (bwrap, docs/secrets.md): the agent's request to the bound host with
// the placeholder reaches the server with the real value, through the proxy variables (curl) and
// without them (Node's fetch); the same placeholder sent to another allowed host arrives unchanged; the
// agent's env and output show only the placeholder, even when the server echoes the value back; each
// use is in the audit trail by name. Test hosts: test/helpers/test-net.ts, secret-hosts.ts.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { controlPlaneBackend, createHttpServer } from '@agentfense/control';
import { useNetworkFixture } from '../helpers/network-fixture.js';
import { call } from '../helpers/mcp.js';
import { makeTestCerts, useHttpsUpstream } from '../helpers/secret-hosts.js';
import type { Seen } from '../helpers/secret-hosts.js';

const VALUE = 'sk-test-REAL-0f1e2d3c4b5a69788796a5b4';
const POLICY = {
  mode: 'allow',
  rules: [
    { action: 'allow', host: 'pub.test' },
    { action: 'allow', host: 'other.test' },
  ],
} as const;
const SECRET = { name: 'API_KEY', hosts: ['pub.test'], value: VALUE };
const certs = makeTestCerts();
const BIN = fileURLToPath(new URL('../../packages/control/bin/agentfense.js', import.meta.url));

describe('secrets', () => {
  const fx = useNetworkFixture({ upstreamCa: certs.ca });
  const upstream = useHttpsUpstream(() => fx().net.nsPath, certs.leaf);
  const seen = (): readonly Seen[] => upstream.seen;

  it('puts the value into requests to the bound host, leaves the placeholder elsewhere, shows only the placeholder', async () => {
    const sb = await fx().sandbox(POLICY, { secrets: [SECRET] });
    const env = await sb.run('printf "%s" "$API_KEY"');
    const placeholder = env.out;
    expect(placeholder).toMatch(/^af-secret-[0-9a-f]{32}$/);
    const r = await sb.run(
      [
        // Through the proxy variables; the sandbox trusts its CA through the system bundle.
        'curl -sS -m 10 -H "Authorization: Bearer $API_KEY" "https://pub.test:8443/v1?key=$API_KEY" -d "{\\"k\\":\\"$API_KEY\\"}"',
        // Without them (Node's fetch ignores them): the transparent path, trusted through NODE_EXTRA_CA_CERTS.
        `node -e "fetch('https://pub.test:8443/node', { headers: { authorization: 'Bearer ' + process.env.API_KEY } }).then(async (r) => process.stdout.write(await r.text()))"`,
        // Another allowed host: not intercepted, its own certificate (the sandbox does not trust it: -k).
        'curl -sS -m 10 -k -H "Authorization: Bearer $API_KEY" https://other.test:8443/other',
        'env',
      ].join('; '),
    );
    expect(r.err).toBe('');
    const byUrl = (url: string): Seen | undefined => seen().find((s) => s.url === url);
    expect(byUrl(`/v1?key=${VALUE}`)).toEqual({
      host: 'pub.test:8443',
      authorization: `Bearer ${VALUE}`,
      url: `/v1?key=${VALUE}`,
      body: `{"k":"${VALUE}"}`,
    });
    expect(byUrl('/node')?.authorization).toBe(`Bearer ${VALUE}`);
    expect(byUrl('/other')?.authorization).toBe(`Bearer ${placeholder}`);
    // The server echoed the real value: the agent got the placeholder back.
    expect(r.out).toContain(`echo Bearer ${placeholder}\n`);
    expect(r.out).toContain(`API_KEY=${placeholder}\n`);
    expect(r.out).not.toContain(VALUE);
    const records = await fx().cp.audit(sb.id, { kind: 'network' });
    const uses = records.filter((e) => e.op === 'secret');
    expect(uses.length).toBe(2);
    expect(uses[0]).toMatchObject({ secret: 'API_KEY', name: 'pub.test', port: 8443, decision: 'allow' });
    expect(JSON.stringify(records)).not.toContain(VALUE);
  });

  it('a header rule adds the value for clients that read no variable', async () => {
    const sb = await fx().sandbox(POLICY, {
      secrets: [{ ...SECRET, header: { name: 'Authorization', value: 'token {value}' } }],
    });
    const r = await sb.run('curl -sS -m 10 https://pub.test:8443/header');
    expect(seen().find((s) => s.url === '/header')?.authorization).toBe(`token ${VALUE}`);
    expect(r.out).not.toContain(VALUE);
  });

  it('the CLI: --secret NAME@host:env:VAR and --secret-file with a command source', async () => {
    const data = await mkdtemp(join(tmpdir(), 'af-secret-cli-'));
    try {
      const caFile = join(data, 'upstream-ca.pem');
      await writeFile(caFile, certs.ca);
      const secretFile = join(data, 'secrets.json');
      const token = 'tok-from-a-command-1234567890';
      await writeFile(
        secretFile,
        JSON.stringify([{ name: 'CMD_TOKEN', hosts: ['pub.test'], command: ['printf', '%s', token] }]),
      );
      const env = {
        ...process.env,
        AGENTFENSE_NETWORK_HOSTS: fx().net.hostsFile,
        AGENTFENSE_NETWORK_UPSTREAM_CA: caFile,
        AGENTFENSE_RUN_HELPER: '0',
        AF_TEST_OPERATOR_KEY: VALUE,
      };
      const ran = await execa(
        'node',
        [
          ...[BIN, 'run', fx().dirs.repo, '--data', data, '--allow-host', 'pub.test', '--keep'],
          ...['--secret', 'API_KEY@pub.test:env:AF_TEST_OPERATOR_KEY', '--secret-file', secretFile, '--'],
          'sh',
          '-c',
          'curl -sS -m 10 -H "Authorization: Bearer $API_KEY" "https://pub.test:8443/cli?t=$CMD_TOKEN"; echo "$API_KEY $CMD_TOKEN"',
        ],
        { env, reject: false },
      );
      const id = /kept sandbox (sb_\S+)/.exec(ran.stderr)?.[1] ?? '';
      await execa('node', [BIN, 'sandbox', 'destroy', id, '--data', data], { env });
      expect(ran.stderr).not.toMatch(/error|refused/i);
      expect(seen().find((s) => s.url === `/cli?t=${token}`)?.authorization).toBe(`Bearer ${VALUE}`);
      expect(ran.stdout).toMatch(
        /^echo Bearer af-secret-[0-9a-f]{32}\naf-secret-[0-9a-f]{32} af-secret-[0-9a-f]{32}$/,
      );
    } finally {
      await rm(data, { recursive: true, force: true });
    }
  });

  it('the HTTP face: secrets in POST /v1/sandboxes are write-only; their uses are in the network audit', async () => {
    const server = createHttpServer({
      backend: controlPlaneBackend(fx().cp, { localCodebases: true }),
      insecureNoAuth: true,
    });
    try {
      const created = await server.app.inject({
        method: 'POST',
        url: '/v1/sandboxes',
        payload: {
          codebase_id: (await fx().cp.listCodebases())[0]?.id ?? '',
          start: true,
          network_policy: POLICY,
          secrets: [{ name: 'API_KEY', hosts: ['pub.test'], value: VALUE }],
        },
      });
      expect(created.statusCode).toBe(200);
      expect(created.body).not.toContain(VALUE);
      const { id } = created.json<{ id: string }>();
      await fx().cp.run(
        id,
        'curl -sS -m 10 -H "Authorization: Bearer $API_KEY" https://pub.test:8443/http-face',
      );
      expect(seen().find((s) => s.url === '/http-face')?.authorization).toBe(`Bearer ${VALUE}`);
      for (const url of [`/v1/sandboxes/${id}`, '/v1/sandboxes', `/v1/sandboxes/${id}/network/audit`]) {
        const got = await server.app.inject({ method: 'GET', url });
        expect(got.body).not.toContain(VALUE);
      }
      const audit = await server.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}/network/audit` });
      expect(audit.json<{ records: { op: string; secret?: string }[] }>().records).toContainEqual(
        expect.objectContaining({ op: 'secret', secret: 'API_KEY' }),
      );
      const bad = await server.app.inject({
        method: 'POST',
        url: '/v1/sandboxes',
        payload: {
          codebase_id: (await fx().cp.listCodebases())[0]?.id ?? '',
          network_policy: POLICY,
          secrets: [{ name: 'API_KEY', hosts: ['pub.test'], value: `${VALUE}\n` }],
        },
      });
      expect(bad.statusCode).toBe(400);
      expect(bad.body).toContain('secret 0 (API_KEY)');
      expect(bad.body).not.toContain(VALUE);
    } finally {
      await server.app.close();
    }
  });

  it("serve's /mcp face: a session on a sandbox made with secrets through POST /v1/sandboxes uses them and leaves the sandbox to its creator", async () => {
    const server = createHttpServer({
      backend: controlPlaneBackend(fx().cp, { localCodebases: true }),
      insecureNoAuth: true,
    });
    try {
      const { host, port } = await server.listen({ host: '127.0.0.1', port: 0 });
      const created = await server.app.inject({
        method: 'POST',
        url: '/v1/sandboxes',
        payload: {
          codebase_id: (await fx().cp.listCodebases())[0]?.id ?? '',
          network_policy: POLICY,
          secrets: [{ name: 'API_KEY', hosts: ['pub.test'], value: VALUE }],
        },
      });
      const { id } = created.json<{ id: string }>();
      let transport: StreamableHTTPClientTransport | undefined;
      const connect = async (query: string): Promise<Client> => {
        const mcp = new Client({ name: 'agentfense-secrets-test', version: '1.0.0' });
        transport = new StreamableHTTPClientTransport(new URL(`http://${host}:${port}/mcp${query}`));
        await mcp.connect(transport);
        return mcp;
      };
      // sandbox_id names a sandbox whole: a codebase or runtime beside it is refused with the reason.
      await expect(connect(`?sandbox_id=${id}&codebase_id=cb_x`)).rejects.toThrow(/drop codebase_id/);
      await expect(connect('?sandbox_id=sb_00000000-0000-4000-8000-000000000000')).rejects.toThrow(
        /AF_NOT_FOUND/,
      );
      const mcp = await connect(`?sandbox_id=${id}`); // started by the session: it was PENDING
      const ran = await call(mcp, 'run', {
        command:
          'curl -sS -m 10 -H "Authorization: Bearer $API_KEY" https://pub.test:8443/mcp-face; echo "$API_KEY"',
      });
      expect(seen().find((s) => s.url === '/mcp-face')?.authorization).toBe(`Bearer ${VALUE}`);
      expect(JSON.stringify(ran.data)).toMatch(/af-secret-[0-9a-f]+/);
      expect(JSON.stringify(ran.data)).not.toContain(VALUE);
      await transport?.terminateSession();
      await mcp.close();
      // The session ended (DELETE): the sandbox is its creator's and still runs.
      expect((await fx().cp.getSandbox(id)).state).toBe('RUNNING');
    } finally {
      // The app alone: the fixture's control plane outlives this server.
      await server.app.close();
    }
  });
});
