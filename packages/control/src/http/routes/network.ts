// The network policy over HTTP: replace a sandbox's policy (a running sandbox applies it at once and
// closes what it no longer allows), give a declared secret its value, and read its network records. Creation takes `network_policy` in
// CreateSandbox (routes/sandboxes.ts).
import type { FastifyInstance } from 'fastify';
import type { NetworkAuditEvent, NetworkPolicyInput } from '@agentfense/network';
import type { HttpBackend } from '../backend.js';
import { defineRoute } from '../define.js';
import { pathId, sandboxToWire } from '../mapping.js';
import { NetworkAuditResult, NetworkPolicyIn, SecretValueIn } from '../network-schemas.js';
import { AuditQuery, IdParams, Sandbox } from '../schemas.js';

const tags = ['network'];
const params = IdParams('sandbox', 'sb');

type IdParam = { id: string };

/** The record in the API's snake_case, times as RFC 3339. */
function recordToWire(e: NetworkAuditEvent): Record<string, unknown> {
  return {
    time: new Date(e.time).toISOString(),
    op: e.op,
    path: e.path,
    decision: e.decision,
    ...(e.rule === undefined ? {} : { rule: e.rule }),
    reason: e.reason,
    ...(e.name === undefined ? {} : { name: e.name }),
    ...(e.address === undefined ? {} : { address: e.address }),
    ...(e.port === undefined ? {} : { port: e.port }),
    ...(e.method === undefined ? {} : { method: e.method }),
    via: e.via,
    ...(e.bytesUp === undefined ? {} : { bytes_up: e.bytesUp }),
    ...(e.bytesDown === undefined ? {} : { bytes_down: e.bytesDown }),
    ...(e.durationMs === undefined ? {} : { duration_ms: e.durationMs }),
    ...(e.secret === undefined ? {} : { secret: e.secret }),
  };
}

export function registerNetworkRoutes(app: FastifyInstance, backend: HttpBackend): void {
  defineRoute<NetworkPolicyInput, unknown, IdParam>(app, {
    method: 'PUT',
    url: '/v1/sandboxes/:id/network',
    operationId: 'SetNetworkPolicy',
    summary:
      "Replace the sandbox's network policy (a running sandbox closes the connections it no longer allows)",
    tags,
    params,
    body: NetworkPolicyIn,
    response: Sandbox,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      return sandboxToWire(await backend.setNetwork(id, req.body));
    },
  });

  defineRoute<{ value: string }, unknown, IdParam & { name: string }>(app, {
    method: 'PUT',
    url: '/v1/sandboxes/:id/secrets/:name',
    operationId: 'SetSecret',
    summary:
      "Give (or replace) the value of one of the sandbox's declared secrets, running or not; write-only: no answer returns it",
    tags,
    params: {
      ...params,
      properties: {
        ...(params['properties'] as Record<string, unknown>),
        name: { type: 'string', description: 'the name of a secret the sandbox was created with' },
      },
      required: ['id', 'name'],
    },
    body: SecretValueIn,
    response: Sandbox,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      return sandboxToWire(await backend.setSecret(id, req.params.name, req.body.value));
    },
  });

  defineRoute<unknown, { decision?: 'allow' | 'deny'; limit?: number }, IdParam>(app, {
    method: 'GET',
    url: '/v1/sandboxes/:id/network/audit',
    operationId: 'NetworkAudit',
    summary: 'Network records of the sandbox: each connection and plain-HTTP request, refused DNS questions',
    tags,
    params,
    querystring: AuditQuery,
    response: NetworkAuditResult,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      const records = await backend.networkAudit(id, {
        ...(req.query.decision === undefined ? {} : { decision: req.query.decision }),
        ...(req.query.limit === undefined ? {} : { limit: req.query.limit }),
      });
      return { records: records.map(recordToWire) };
    },
  });
}
