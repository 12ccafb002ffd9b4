// Secrets across a control-plane restart (docs/secrets.md, "Across a restart"): a kept sandbox whose
// secret comes from an environment variable gets its value again when a control plane opened later on
// the same data directory starts it (the store kept the source, never the value), with the same
// placeholder; a secret given by value stays a placeholder and the state reason names it, until setSecret
// gives it a value again (used at once by the running sandbox). The data
// directory's bytes never hold a value; inspect (library, HTTP, CLI) lists names and hosts only.
import { execFileSync } from 'node:child_process';
import type { Server } from 'node:https';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane, controlPlaneBackend, createHttpServer } from '@agentfense/control';
import { assertCleanAndRemove, makeDirs } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';
import { makeTestCerts, serveHttps } from '../helpers/secret-hosts.js';
import type { Seen } from '../helpers/secret-hosts.js';
import { makeTestNet } from '../helpers/test-net.js';
import type { TestNet } from '../helpers/test-net.js';

const FROM_ENV = 'sk-restart-ENV-5e4d3c2b1a09f8e7d6c5';
const BY_VALUE = 'sk-restart-GIVEN-a1b2c3d4e5f60718293a';
const POLICY = {
  mode: 'allow',
  rules: [
    { action: 'allow', host: 'pub.test' },
    { action: 'allow', host: 'other.test' },
  ],
} as const;
const BIN = fileURLToPath(new URL('../../packages/control/bin/agentfense.js', import.meta.url));
const certs = makeTestCerts();
process.env['AF_TEST_RESTART_KEY'] = FROM_ENV;

/** Files under `dir` whose bytes contain `value` (grep exits 1 when none does). */
function filesHolding(dir: string, value: string): string {
  try {
    return execFileSync('grep', ['-rlaF', '--', value, dir], { encoding: 'utf8' });
  } catch (err) {
    if ((err as { status?: number }).status === 1) return '';
    throw err;
  }
}

describe('secrets across a control-plane restart', () => {
  let net: TestNet;
  let dirs: TestDirs;
  let server: Server;
  let seen: Seen[];
  let cp: ControlPlane | undefined;
  const open = (): Promise<ControlPlane> =>
    ControlPlane.open({
      dataDir: dirs.dataDir,
      network: { hostsFile: net.hostsFile, upstreamCa: certs.ca },
    });
  /** The request from inside; curl's own error, if any (empty when the server answered). */
  const curl = async (id: string, url: string, host = 'pub.test', key = 'API_KEY'): Promise<string> => {
    const r = await (cp as ControlPlane).run(
      id,
      `curl -sS -m 10 -o /dev/null -H "Authorization: Bearer $${key}" -H "X-Given: $GIVEN" https://${host}:8443${url}`,
    );
    return r.stderr.toString();
  };

  beforeAll(async () => {
    net = await makeTestNet();
    dirs = await makeDirs();
    ({ server, seen } = serveHttps(net.nsPath, 8443, certs.leaf));
  }, 120_000);
  afterAll(async () => {
    server.close();
    if (cp !== undefined) {
      for (const sb of (await cp.listSandboxes()).items) await cp.destroySandbox(sb.id);
      await cp.close();
    }
    await net.close();
    await assertCleanAndRemove(dirs);
  }, 120_000);

  it('reads an env source again after the restart, leaves a value-given secret unusable, stores no value', async () => {
    cp = await open();
    const { id: codebaseId } = await cp.linkCodebase({ path: dirs.repo });
    const { id } = await cp.createSandbox({
      codebaseId,
      network: POLICY,
      secrets: [
        { name: 'API_KEY', hosts: ['pub.test'], env: 'AF_TEST_RESTART_KEY' },
        { name: 'GIVEN', hosts: ['pub.test', 'other.test'], value: BY_VALUE },
      ],
    });
    await cp.startSandbox(id);
    const before = (await cp.run(id, 'printf "%s %s" "$API_KEY" "$GIVEN"')).stdout.toString();
    expect(await curl(id, '/before')).toBe('');
    expect(seen.find((s) => s.url === '/before')?.authorization).toBe(`Bearer ${FROM_ENV}`);
    await cp.close();

    // Nothing on disk holds a value: the database (and its WAL), logs, audit trails, state files.
    expect(filesHolding(dirs.dataDir, FROM_ENV)).toBe('');
    expect(filesHolding(dirs.dataDir, BY_VALUE)).toBe('');

    cp = await open();
    expect((await cp.getSandbox(id)).secrets).toEqual([
      { name: 'API_KEY', hosts: ['pub.test'], source: 'env' },
      { name: 'GIVEN', hosts: ['pub.test', 'other.test'], source: 'value' },
    ]);
    const started = await cp.startSandbox(id);
    expect(started.state).toBe('RUNNING');
    expect(started.stateReason).toMatch(/^secret GIVEN was given by value, which is never stored/);
    expect(started.stateReason).not.toContain('API_KEY');
    // The same placeholders as before the restart: what the agent kept of them still works.
    expect((await cp.run(id, 'printf "%s %s" "$API_KEY" "$GIVEN"')).stdout.toString()).toBe(before);
    expect(await curl(id, '/after')).toBe('');
    const after = seen.find((s) => s.url === '/after');
    expect(after?.authorization).toBe(`Bearer ${FROM_ENV}`);
    expect(JSON.stringify(after)).not.toContain(BY_VALUE);

    // The value given again to the running sandbox: used at once, on a host no usable secret was bound
    // to at the start (the sandbox's CA covers every declared secret's hosts), and the reason is gone.
    const given = await cp.setSecret(id, 'GIVEN', { value: BY_VALUE });
    expect(given.stateReason).toBeNull();
    expect(await curl(id, '/given', 'other.test', 'GIVEN')).toBe('');
    expect(seen.find((s) => s.url === '/given')?.authorization).toBe(`Bearer ${BY_VALUE}`);
    expect((await cp.run(id, `printf '%s' ${BY_VALUE}`)).stdout.toString()).toBe('[secret GIVEN redacted]');

    // The HTTP face's GET lists names and hosts, never a value.
    const http = createHttpServer({
      backend: controlPlaneBackend(cp, { localCodebases: true }),
      insecureNoAuth: true,
    });
    try {
      const got = await http.app.inject({ method: 'GET', url: `/v1/sandboxes/${id}` });
      expect(got.json<{ secrets: unknown }>().secrets).toEqual([
        { name: 'API_KEY', hosts: ['pub.test'], source: 'env' },
        { name: 'GIVEN', hosts: ['pub.test', 'other.test'], source: 'value' },
      ]);
      expect(got.body).not.toContain(FROM_ENV);
      // An API caller gives values only: a source would have this process read its environment.
      const named = await http.app.inject({
        method: 'POST',
        url: '/v1/sandboxes',
        payload: {
          codebase_id: started.codebaseId,
          network_policy: POLICY,
          secrets: [{ name: 'API_KEY', hosts: ['pub.test'], env: 'AF_TEST_RESTART_KEY' }],
        },
      });
      expect(named.statusCode).toBe(400);
      expect(named.body).not.toContain(FROM_ENV);
    } finally {
      await http.app.close();
    }
    await cp.stopSandbox(id);
    // The CLI's inspect, another process on the same data directory.
    const inspect = await execa('node', [BIN, 'sandbox', 'inspect', id, '--data', dirs.dataDir]);
    expect(inspect.stdout).toMatch(
      /secrets\s+API_KEY@pub\.test \(env\); GIVEN@pub\.test,other\.test \(value\)/,
    );
    expect(filesHolding(dirs.dataDir, FROM_ENV)).toBe('');
    expect(filesHolding(dirs.dataDir, BY_VALUE)).toBe('');
  });
});
