// Giving a declared secret of an existing sandbox its value (setSecret, docs/secrets.md): a running
// sandbox's requests carry the new value at once, the agent sees the same placeholder, the new value is
// masked in output; the audit records the set by name; an undeclared name is refused with the names
// it could be; over HTTP the value is write-only; the CLI, in another process, records a source that
// the next start reads again. Test hosts: test/helpers/test-net.ts, secret-hosts.ts.
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { controlPlaneBackend, createHttpServer } from '@agentfense/control';
import { NotFoundError } from '@agentfense/protocol';
import { useNetworkFixture } from '../helpers/network-fixture.js';
import { makeTestCerts, useHttpsUpstream } from '../helpers/secret-hosts.js';

const FIRST = 'sk-set-FIRST-0a1b2c3d4e5f6a7b8c9d';
const SECOND = 'sk-set-SECOND-9f8e7d6c5b4a3f2e1d0c';
const FROM_CLI_ENV = 'sk-set-CLIENV-1234567890abcdef1234';
const POLICY = { mode: 'allow', rules: [{ action: 'allow', host: 'pub.test' }] } as const;
const certs = makeTestCerts();
const BIN = fileURLToPath(new URL('../../packages/control/bin/agentfense.js', import.meta.url));
const CURL = 'curl -sS -m 10 -H "Authorization: Bearer $API_KEY" https://pub.test:8443';

describe('setSecret', () => {
  const fx = useNetworkFixture({ upstreamCa: certs.ca });
  const upstream = useHttpsUpstream(() => fx().net.nsPath, certs.leaf);
  const authAt = upstream.authAt;

  it('a running sandbox uses the new value at once; the output masks it; the audit names the set', async () => {
    const sb = await fx().sandbox(POLICY, {
      secrets: [{ name: 'API_KEY', hosts: ['pub.test'], value: FIRST }],
    });
    const placeholder = (await sb.run('printf "%s" "$API_KEY"')).out;
    expect((await sb.run(`${CURL}/first`)).err).toBe('');
    expect(authAt('/first')).toBe(`Bearer ${FIRST}`);

    const info = await fx().cp.setSecret(sb.id, 'API_KEY', { value: SECOND });
    expect(info.secrets).toEqual([{ name: 'API_KEY', hosts: ['pub.test'], source: 'value' }]);
    const r = await sb.run(`${CURL}/second; printf '%s|%s' "$API_KEY" ${SECOND}`);
    expect(r.err).toBe('');
    expect(authAt('/second')).toBe(`Bearer ${SECOND}`);
    // The server's echo of the new value comes back as the placeholder; the value printed is masked.
    expect(r.out).toBe(`echo Bearer ${placeholder}\n${placeholder}|[secret API_KEY redacted]`);

    const records = await fx().cp.audit(sb.id, { kind: 'network' });
    const sets = records.filter((e) => e.op === 'secret-set');
    expect(sets).toEqual([
      expect.objectContaining({ secret: 'API_KEY', path: 'API_KEY', via: 'control', decision: 'allow' }),
    ]);
    expect(records.filter((e) => e.op === 'secret').length).toBe(2);
    expect(JSON.stringify(records)).not.toContain(SECOND);

    const undeclared = await fx()
      .cp.setSecret(sb.id, 'OTHER_KEY', { value: SECOND })
      .catch((e: unknown) => e);
    expect(undeclared).toBeInstanceOf(NotFoundError);
    expect((undeclared as Error).message).toBe(
      `sandbox ${sb.id} declares no secret "OTHER_KEY" (its secrets: API_KEY): a secret's name and hosts are fixed at create (--secret NAME@HOST); give a value to one of its own`,
    );
    const bad = await fx()
      .cp.setSecret(sb.id, 'API_KEY', { value: `${SECOND}\nX-Injected: 1` })
      .catch((e: unknown) => e);
    expect((bad as Error).message).toMatch(/^secret 0 \(API_KEY\): the value holds a line break/);
    expect((bad as Error).message).not.toContain(SECOND);
  });

  it('over HTTP the value is write-only; a source is refused', async () => {
    const sb = await fx().sandbox(POLICY, {
      secrets: [{ name: 'API_KEY', hosts: ['pub.test'], value: FIRST }],
    });
    const http = createHttpServer({
      backend: controlPlaneBackend(fx().cp, { localCodebases: true }),
      insecureNoAuth: true,
    });
    try {
      const put = (name: string, payload: Record<string, string>) =>
        http.app.inject({ method: 'PUT', url: `/v1/sandboxes/${sb.id}/secrets/${name}`, payload });
      const ok = await put('API_KEY', { value: SECOND });
      expect(ok.statusCode).toBe(200);
      expect(ok.json<{ secrets: unknown }>().secrets).toEqual([
        { name: 'API_KEY', hosts: ['pub.test'], source: 'value' },
      ]);
      expect(ok.body).not.toContain(SECOND);
      expect((await sb.run(`${CURL}/http`)).err).toBe('');
      expect(authAt('/http')).toBe(`Bearer ${SECOND}`);
      // An API caller gives values only: naming a variable would have this process read its environment.
      const named = await put('API_KEY', { env: 'PATH' });
      expect(named.statusCode).toBe(400);
      const missing = await put('NOPE', { value: SECOND });
      expect(missing.statusCode).toBe(404);
      expect(missing.body).not.toContain(SECOND);
      const audit = await http.app.inject({ method: 'GET', url: `/v1/sandboxes/${sb.id}/network/audit` });
      expect(audit.json<{ records: { op: string }[] }>().records.map((e) => e.op)).toContain('secret-set');
      expect(audit.body).not.toContain(SECOND);
    } finally {
      await http.app.close();
    }
  });

  it('the CLI records a source on a stopped sandbox, which its next start reads', async () => {
    const sb = await fx().sandbox(POLICY, {
      secrets: [{ name: 'API_KEY', hosts: ['pub.test'], value: FIRST }],
    });
    await fx().cp.stopSandbox(sb.id);
    const cli = (args: string[], options: { input?: string } = {}) =>
      execa('node', [BIN, 'sandbox', 'secret', sb.id, 'API_KEY', '--data', fx().dirs.dataDir, ...args], {
        reject: false,
        env: { AF_TEST_SET_KEY: FROM_CLI_ENV },
        ...options,
      });
    // A value on standard input would end with this process: refused, with the ways that work.
    const stdin = await cli([], { input: `${SECOND}\n` });
    expect(stdin.exitCode).not.toBe(0);
    expect(stdin.stderr).toContain('--server URL');
    expect(stdin.stderr).not.toContain(SECOND);
    const set = await cli(['--from', 'env:AF_TEST_SET_KEY']);
    expect(set.stderr).toBe('');
    expect(set.stdout).toBe(`secret API_KEY of ${sb.id} given a value`);
    expect((await fx().cp.getSandbox(sb.id)).secrets).toEqual([
      { name: 'API_KEY', hosts: ['pub.test'], source: 'env' },
    ]);

    // This process held the first value; the source another process recorded wins at the next start.
    process.env['AF_TEST_SET_KEY'] = FROM_CLI_ENV;
    try {
      await fx().cp.startSandbox(sb.id);
      expect((await sb.run(`${CURL}/cli`)).err).toBe('');
      expect(authAt('/cli')).toBe(`Bearer ${FROM_CLI_ENV}`);
    } finally {
      delete process.env['AF_TEST_SET_KEY'];
    }
    const undeclared = await execa(
      'node',
      [BIN, 'sandbox', 'secret', sb.id, 'NOPE', '--data', fx().dirs.dataDir, '--from', 'env:HOME'],
      { reject: false },
    );
    expect(undeclared.exitCode).not.toBe(0);
    expect(undeclared.stderr).toContain('declares no secret "NOPE" (its secrets: API_KEY)');
  });
});
