// Attacks on setSecret (docs/secrets.md, "Giving a value later"): the agent inside cannot reach the
// control plane to give a secret a value of its own choosing; an HTTP client without the server's token
// cannot either; and a value given to a running sandbox is masked everywhere the first one was — in a
// session shell opened before the set, the audit trail, a refused call's error and every API answer.
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { controlPlaneBackend, createHttpServer } from '@agentfense/control';
import { useNetworkFixture } from '../helpers/network-fixture.js';
import { makeTestCerts, useHttpsUpstream } from '../helpers/secret-hosts.js';

const FIRST = 'sk-setattack-FIRST-aa11bb22cc33dd44ee55';
const GIVEN = 'sk-setattack-GIVEN-ff66ee77dd88cc99bb00';
const TOKEN = 'a'.repeat(64);
const POLICY = { mode: 'open' } as const;
const SECRET = { name: 'API_KEY', hosts: ['pub.test'], value: FIRST };
const certs = makeTestCerts();
const CURL = 'curl -sS -m 10 -o /dev/null -H "Authorization: Bearer $API_KEY" https://pub.test:8443';

describe('setSecret attacks', () => {
  const fx = useNetworkFixture({ upstreamCa: certs.ca });
  const upstream = useHttpsUpstream(() => fx().net.nsPath, certs.leaf);
  const authAt = upstream.authAt;

  it('neither the agent inside nor a client without the token can give a value', async () => {
    const sb = await fx().sandbox(POLICY, { secrets: [SECRET] });
    const http = createHttpServer({
      backend: controlPlaneBackend(fx().cp, { localCodebases: true }),
      token: TOKEN,
    });
    await http.app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { port } = http.app.server.address() as AddressInfo;
      const url = `http://127.0.0.1:${port}/v1/sandboxes/${sb.id}/secrets/API_KEY`;
      // The agent (network open) dials the control plane's loopback port: its loopback is its own.
      const inside = await sb.run(
        `curl -sS -m 5 -X PUT -H 'content-type: application/json' -d '{"value":"agent-chosen"}' ${url}; echo " exit $?"`,
      );
      expect(inside.out).toMatch(/ exit (7|28)\n$/);
      // A client on the host without the token, or with a wrong one, is refused.
      for (const authorization of [undefined, `Bearer ${'b'.repeat(64)}`]) {
        const r = await fetch(url, {
          method: 'PUT',
          headers: {
            'content-type': 'application/json',
            ...(authorization === undefined ? {} : { authorization }),
          },
          body: JSON.stringify({ value: 'client-chosen' }),
        });
        expect(r.status).toBe(401);
      }
      // The sandbox's requests still carry the operator's value.
      expect((await sb.run(`${CURL}/after-attacks`)).err).toBe('');
      expect(authAt('/after-attacks')).toBe(`Bearer ${FIRST}`);
      // With the token, the same call works (the refusals above were the token's doing).
      const ok = await fetch(url, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify({ value: GIVEN }),
      });
      expect(ok.status).toBe(200);
      expect(await ok.text()).not.toContain(GIVEN);
      expect((await sb.run(`${CURL}/with-token`)).err).toBe('');
      expect(authAt('/with-token')).toBe(`Bearer ${GIVEN}`);
    } finally {
      await http.app.close();
    }
  });

  it('a value given while the sandbox runs is masked in a shell opened before, the audit, errors and answers', async () => {
    const sb = await fx().sandbox(POLICY, { secrets: [SECRET], env: { LEAKED: GIVEN } });
    const session = await fx().cp.createSession(sb.id);
    try {
      const info = await fx().cp.setSecret(sb.id, 'API_KEY', { value: GIVEN });
      expect(JSON.stringify(info)).not.toContain(GIVEN);
      // The operator's env held the new value too: the shell opened before the set masks it now.
      const inShell = await session.run('echo "shell $LEAKED"');
      expect(inShell.stdout).toBe('shell [secret API_KEY redacted]\n');
      const r = await sb.run('echo "out $LEAKED"');
      expect(r.out).toBe('out [secret API_KEY redacted]\n');
    } finally {
      await session.close();
    }
    // A refused value is not echoed in the error.
    const refused = await fx()
      .cp.setSecret(sb.id, 'API_KEY', { value: `${GIVEN}\r\nX-Evil: 1` })
      .catch((e: unknown) => e as Error);
    expect(refused).toBeInstanceOf(Error);
    expect((refused as Error).message).not.toContain(GIVEN);
    const records = await fx().cp.audit(sb.id, { kind: 'network' });
    expect(records.some((e) => e.op === 'secret-set' && e.secret === 'API_KEY')).toBe(true);
    expect(JSON.stringify(records)).not.toContain(GIVEN);
    expect(JSON.stringify([await fx().cp.getSandbox(sb.id), await fx().cp.listSandboxes()])).not.toContain(
      GIVEN,
    );
  });
});
