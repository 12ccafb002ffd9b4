// The network policy on the gRPC face, against a real `agentfense serve`: a sandbox created with a
// policy reports it, SetNetworkPolicy replaces it (and the HTTP face reads the same policy), a bad rule
// is INVALID_ARGUMENT with the HTTP face's message, GetNetworkAudit lists what a command inside the
// sandbox was refused, and SetSecret gives a declared secret a new value, write-only and audited by name.
// Nothing here needs a reachable host: refused names are never dialled or resolved.
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-return, @typescript-eslint/no-unsafe-argument --
   gRPC messages are loaded from the .proto at run time (as the SDK's are), so they are untyped here. */
import { describe, expect, it } from 'vitest';
import { client as httpClient } from '../helpers/http-fixture.js';
import { codeOf, status, uploadMessages, type GrpcClient, type Message } from '../helpers/grpc-client.js';
import { startGrpcServer } from '../helpers/grpc-serve.js';

const READ_ALL = [{ pattern: '**', permission: 'PERMISSION_READ' }];
const UNKNOWN_SANDBOX = 'sb_00000000-0000-4000-8000-000000000000';

/** A network rule as a proto3 reply carries it: every field present, defaults included. */
const wireRule = (rule: Message): Message => ({
  host: '',
  cidr: '',
  ports: [],
  methods: [],
  priority: 0,
  ...rule,
});

async function codebase(c: GrpcClient): Promise<string> {
  const { id } = await c.unary('codebase', 'CreateCodebase', { name: 'net', owner_id: 'u' });
  await c.upload(uploadMessages(id, 'a.txt', Buffer.from('a\n')));
  return id;
}

describe('gRPC sandbox.v1: the network policy', () => {
  it('creates with a policy, replaces it, and both faces read the same; bad input is refused', async () => {
    const server = await startGrpcServer();
    const c = server.client();
    const http = httpClient(server.served.url, server.served.token);
    const codebaseId = await codebase(c);

    const created = await c.unary('sandbox', 'CreateSandbox', {
      codebase_id: codebaseId,
      permissions: READ_ALL,
      network_policy: { rules: [{ action: 'allow', host: 'Pub.Test', ports: [80] }] },
    });
    // Rules without a mode mean allow; the host is stored normalized, as over HTTP.
    const allowPub = { mode: 'allow', rules: [wireRule({ action: 'allow', host: 'pub.test', ports: [80] })] };
    expect(created.network_policy).toEqual({ ...allowPub, presets: [] });
    const got = await c.unary('sandbox', 'GetSandbox', { sandbox_id: created.id });
    expect(got.network_policy).toEqual(created.network_policy);

    const replaced = await c.unary('sandbox', 'SetNetworkPolicy', {
      sandbox_id: created.id,
      policy: { mode: 'open', rules: [{ action: 'deny', cidr: '203.0.113.0/24', priority: 5 }] },
    });
    const open = { mode: 'open', rules: [{ action: 'deny', cidr: '203.0.113.0/24', priority: 5 }] };
    expect(replaced.network_policy).toEqual({ mode: 'open', rules: open.rules.map(wireRule), presets: [] });
    const overHttp = await http('GET', `/v1/sandboxes/${created.id}`);
    expect(overHttp.status).toBe(200);
    expect(overHttp.json.networkPolicy).toEqual(open);
    // And the other way round: a policy set over HTTP is what gRPC reports.
    await http('PUT', `/v1/sandboxes/${created.id}/network`, { presets: ['model-apis'] });
    const viaHttp = await c.unary('sandbox', 'GetSandbox', { sandbox_id: created.id });
    expect(viaHttp.network_policy.mode).toBe('allow');
    expect(viaHttp.network_policy.rules).toContainEqual(
      wireRule({ action: 'allow', host: 'api.openai.com', ports: [443] }),
    );

    // A bad rule: INVALID_ARGUMENT with the HTTP face's message, which names the rule; nothing changes.
    const bad = { mode: 'allow', rules: [{ action: 'allow', host: 'a b' }] };
    const refused = await c
      .unary('sandbox', 'SetNetworkPolicy', { sandbox_id: created.id, policy: bad })
      .catch((e: unknown) => e);
    expect(refused.code).toBe(status.INVALID_ARGUMENT);
    expect(refused.details).toBe('network rule 0: "a b" is not a host name or a `*.domain` wildcard');
    expect(refused.metadata.get('x-agentfense-code')).toEqual(['AF_INVALID_ARGUMENT']);
    const httpRefused = await http('PUT', `/v1/sandboxes/${created.id}/network`, bad);
    expect(httpRefused.status).toBe(400);
    expect(httpRefused.json.message).toBe(refused.details);
    expect((await c.unary('sandbox', 'GetSandbox', { sandbox_id: created.id })).network_policy).toEqual(
      viaHttp.network_policy,
    );
    const createRefused = await c
      .unary('sandbox', 'CreateSandbox', {
        codebase_id: codebaseId,
        permissions: READ_ALL,
        network_policy: { mode: 'none', rules: [{ action: 'allow', cidr: '10.0.0.0/8' }] },
      })
      .catch((e: unknown) => e);
    expect(createRefused.code).toBe(status.INVALID_ARGUMENT);
    expect(createRefused.details).toMatch(/^network policy: mode "none" takes no rules/);
    expect((await c.unary('sandbox', 'ListSandboxes', {})).sandboxes).toHaveLength(1);

    // Unknown sandbox, bad query, no token: as every other RPC answers them.
    for (const [what, call, code] of [
      [
        'SetNetworkPolicy of an unknown sandbox',
        () =>
          c.unary('sandbox', 'SetNetworkPolicy', { sandbox_id: UNKNOWN_SANDBOX, policy: { mode: 'open' } }),
        status.NOT_FOUND,
      ],
      [
        'GetNetworkAudit of an unknown sandbox',
        () => c.unary('sandbox', 'GetNetworkAudit', { sandbox_id: UNKNOWN_SANDBOX }),
        status.NOT_FOUND,
      ],
      [
        'GetNetworkAudit with an unknown decision',
        () => c.unary('sandbox', 'GetNetworkAudit', { sandbox_id: created.id, decision: 'maybe' }),
        status.INVALID_ARGUMENT,
      ],
      [
        'SetNetworkPolicy without a token',
        () =>
          server
            .client(null)
            .unary('sandbox', 'SetNetworkPolicy', { sandbox_id: created.id, policy: { mode: 'open' } }),
        status.UNAUTHENTICATED,
      ],
    ] as const) {
      expect(`${what}: ${status[await codeOf(call())]}`).toBe(`${what}: ${status[code]}`);
    }
  });

  it('GetNetworkAudit lists the connections and DNS questions a command was refused', async () => {
    const server = await startGrpcServer();
    const c = server.client();
    const created = await c.unary('sandbox', 'CreateSandbox', {
      codebase_id: await codebase(c),
      permissions: READ_ALL,
      network_policy: {
        mode: 'allow',
        rules: [
          { action: 'deny', host: 'evil.test', ports: [80] },
          { action: 'allow', host: 'pub.test' },
        ],
      },
    });
    await c.unary('sandbox', 'StartSandbox', { sandbox_id: created.id });
    // curl goes through the proxy variables (a 403 naming the policy); getent asks the sandbox's DNS.
    const r = await c.unary('sandbox', 'Exec', {
      sandbox_id: created.id,
      command:
        'curl -s -m 5 -o /dev/null -w "%{http_code}\\n" http://evil.test/; getent hosts evil.test; echo "getent $?"',
      timeout: { seconds: 30, nanos: 0 },
    });
    expect(r.stdout).toBe('403\ngetent 2\n');

    const audit = await c.unary('sandbox', 'GetNetworkAudit', { sandbox_id: created.id });
    const seen = audit.records.map((e: Message) => `${e.op} ${e.decision} ${e.path} ${e.via}`);
    // getent asks for IPv6 and IPv4 addresses: one refused question each.
    expect(new Set(seen)).toEqual(new Set(['connect deny evil.test:80 proxy', 'dns deny evil.test dns']));
    // Rule 0 decided the request; no rule decided the DNS question (an absent rule, not rule 0).
    expect(audit.records[0]).toMatchObject({ name: 'evil.test', port: 80, method: 'GET', rule: 0 });
    expect(audit.records[1]).toMatchObject({ reason: 'no rule allows the name (mode allow)' });
    expect(audit.records[1].rule).toBeUndefined();
    expect(Number(audit.records[0].time.seconds) * 1000).toBeGreaterThan(Date.now() - 120_000);
    // The query's filters, as the HTTP route's: the most recent N, one decision.
    const last = await c.unary('sandbox', 'GetNetworkAudit', { sandbox_id: created.id, limit: 1 });
    expect(last.records.map((e: Message) => e.op)).toEqual(['dns']);
    const allowed = await c.unary('sandbox', 'GetNetworkAudit', {
      sandbox_id: created.id,
      decision: 'allow',
    });
    expect(allowed.records).toEqual([]);
    // The HTTP face lists the same records.
    const http = httpClient(server.served.url, server.served.token);
    const overHttp = await http('GET', `/v1/sandboxes/${created.id}/network/audit`);
    expect(overHttp.json.records.map((e: Message) => `${e.op} ${e.decision} ${e.path} ${e.via}`)).toEqual(
      seen,
    );
  });

  it('secrets in CreateSandbox are write-only: the sandbox sees a placeholder, no reply carries the value', async () => {
    const value = 'sk-grpc-REAL-0123456789abcdef';
    const server = await startGrpcServer();
    const c = server.client();
    const codebaseId = await codebase(c);
    const secret = { name: 'API_KEY', hosts: ['pub.test'], value };
    const created = await c.unary('sandbox', 'CreateSandbox', {
      codebase_id: codebaseId,
      permissions: READ_ALL,
      network_policy: { rules: [{ action: 'allow', host: 'pub.test' }] },
      secrets: [secret],
    });
    await c.unary('sandbox', 'StartSandbox', { sandbox_id: created.id });
    const r = await c.unary('sandbox', 'Exec', {
      sandbox_id: created.id,
      command: 'printf "%s" "$API_KEY"',
      timeout: { seconds: 30, nanos: 0 },
    });
    expect(r.stdout).toMatch(/^af-secret-[0-9a-f]{32}$/);
    const replies = [
      created,
      await c.unary('sandbox', 'GetSandbox', { sandbox_id: created.id }),
      await c.unary('sandbox', 'ListSandboxes', {}),
    ];
    expect(JSON.stringify(replies)).not.toContain(value);
    // Every reply names the secret, its hosts and its source kind.
    expect(created.secrets).toEqual([
      { name: 'API_KEY', hosts: ['pub.test'], paths: [], methods: [], header: null, source: 'value' },
    ]);
    // A bad secret: INVALID_ARGUMENT naming it, never echoing its value.
    const refused = await c
      .unary('sandbox', 'CreateSandbox', {
        codebase_id: codebaseId,
        permissions: READ_ALL,
        network_policy: { mode: 'open' },
        secrets: [{ ...secret, hosts: [] }],
      })
      .catch((e: unknown) => e);
    expect(refused.code).toBe(status.INVALID_ARGUMENT);
    expect(refused.details).toMatch(/^secret 0 \(API_KEY\): `hosts` must be a non-empty array/);
    expect(String(refused.details)).not.toContain(value);

    // SetSecret replaces the value of the running sandbox's declared secret: the reply, like the audit
    // record it leaves, names the secret and never the value.
    const newValue = 'sk-grpc-NEW-fedcba9876543210';
    const set = await c.unary('sandbox', 'SetSecret', {
      sandbox_id: created.id,
      name: 'API_KEY',
      value: newValue,
    });
    expect(set.secrets).toEqual(created.secrets);
    const masked = await c.unary('sandbox', 'Exec', {
      sandbox_id: created.id,
      command: `printf '%s' ${newValue}`,
      timeout: { seconds: 30, nanos: 0 },
    });
    expect(masked.stdout).toBe('[secret API_KEY redacted]');
    const audit = await c.unary('sandbox', 'GetNetworkAudit', { sandbox_id: created.id });
    const setRecords = audit.records.filter((e: Message) => e.op === 'secret-set');
    expect(setRecords).toHaveLength(1);
    expect(setRecords[0]).toMatchObject({ secret: 'API_KEY', via: 'control', decision: 'allow' });
    expect(JSON.stringify([set, audit])).not.toContain(newValue);
    for (const [what, call, code] of [
      [
        'SetSecret of an undeclared name',
        () => c.unary('sandbox', 'SetSecret', { sandbox_id: created.id, name: 'OTHER', value: newValue }),
        status.NOT_FOUND,
      ],
      [
        'SetSecret of an unknown sandbox',
        () =>
          c.unary('sandbox', 'SetSecret', { sandbox_id: UNKNOWN_SANDBOX, name: 'API_KEY', value: newValue }),
        status.NOT_FOUND,
      ],
      [
        'SetSecret with a line break in the value',
        () => c.unary('sandbox', 'SetSecret', { sandbox_id: created.id, name: 'API_KEY', value: 'a\nb' }),
        status.INVALID_ARGUMENT,
      ],
      [
        'SetSecret without a token',
        () =>
          server
            .client(null)
            .unary('sandbox', 'SetSecret', { sandbox_id: created.id, name: 'API_KEY', value: newValue }),
        status.UNAUTHENTICATED,
      ],
    ] as const) {
      expect(`${what}: ${status[await codeOf(call())]}`).toBe(`${what}: ${status[code]}`);
    }
    const undeclared = await c
      .unary('sandbox', 'SetSecret', { sandbox_id: created.id, name: 'OTHER', value: newValue })
      .catch((e: unknown) => e);
    expect(undeclared.details).toBe(
      `sandbox ${created.id} declares no secret "OTHER" (its secrets: API_KEY): a secret's name and hosts are fixed at create (--secret NAME@HOST); give a value to one of its own`,
    );
  });
});
