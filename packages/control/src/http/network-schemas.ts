// JSON Schemas of the network policy in the HTTP API (our own fields, beside the original's `network`
// flag): the policy a sandbox is created or updated with, the one it reports, and its audit records.
import { NETWORK_MODES, NETWORK_PRESETS } from '@agentfense/network';
import { object, outObject } from './schema-builders.js';

const NetworkRule = object(
  'NetworkRule',
  {
    action: { type: 'string', enum: ['allow', 'deny'] },
    host: { type: 'string', description: 'a host name, or `*.domain` for any name below it' },
    cidr: { type: 'string', description: 'an address range, `10.0.0.0/8`, `2001:db8::/32`' },
    ports: { type: 'array', items: { type: 'integer', minimum: 1, maximum: 65535 } },
    methods: { type: 'array', items: { type: 'string' }, description: 'plain HTTP only' },
    priority: { type: 'integer' },
  },
  ['action'],
);

export const NetworkPolicyIn = object('NetworkPolicyInput', {
  mode: {
    type: 'string',
    enum: [...NETWORK_MODES],
    description:
      'none (loopback only), allow (only what rules allow; the default when rules are given), open',
  },
  rules: { type: 'array', items: NetworkRule },
  presets: { type: 'array', items: { type: 'string', enum: Object.keys(NETWORK_PRESETS) } },
});

/** A secret given at create: write-only, its value is never returned by any route (docs/secrets.md). */
export const SecretIn = object(
  'SecretInput',
  {
    name: { type: 'string', description: 'the variable the sandbox gets, set to a placeholder' },
    hosts: {
      type: 'array',
      items: { type: 'string' },
      description: 'hosts (or `*.domain`) whose HTTPS requests get the value in place of the placeholder',
    },
    paths: { type: 'array', items: { type: 'string' }, description: 'path prefixes (default any)' },
    methods: { type: 'array', items: { type: 'string' }, description: 'HTTP methods (default any)' },
    header: object('SecretHeader', { name: { type: 'string' }, value: { type: 'string' } }, [
      'name',
      'value',
    ]),
    value: { type: 'string', description: 'the value; write-only' },
  },
  ['name', 'hosts', 'value'],
);

/** A value given to a declared secret of an existing sandbox: write-only, never returned. */
export const SecretValueIn = object(
  'SecretValue',
  { value: { type: 'string', description: 'the value; write-only (no answer returns it)' } },
  ['value'],
);

/** A sandbox's secret as every answer shows it: where it may be used and its source, never a value. */
export const SecretOut = object(
  'SecretInfo',
  {
    name: { type: 'string' },
    hosts: { type: 'array', items: { type: 'string' } },
    paths: { type: 'array', items: { type: 'string' } },
    methods: { type: 'array', items: { type: 'string' } },
    header: object('SecretHeaderInfo', { name: { type: 'string' }, value: { type: 'string' } }, [
      'name',
      'value',
    ]),
    source: {
      type: 'string',
      enum: ['env', 'file', 'command', 'value'],
      description:
        'where the value comes from; `value`: given by value, not kept, so a restarted control plane lacks it',
    },
  },
  ['name', 'hosts', 'source'],
);

export const NetworkPolicyOut = outObject('NetworkPolicy', {
  mode: { type: 'string', enum: [...NETWORK_MODES] },
  rules: { type: 'array', items: NetworkRule },
});

export const NetworkAuditResult = outObject('NetworkAuditResponse', {
  records: {
    type: 'array',
    items: {
      title: 'NetworkAuditRecord',
      type: 'object',
      description:
        'one connection, plain-HTTP request, refused DNS question, use of a secret or value given to one',
      properties: {
        time: { type: 'string', description: 'RFC 3339 time' },
        op: {
          type: 'string',
          enum: ['connect', 'dns', 'secret', 'secret-set'],
          description: '`secret-set`: a value given to a secret through the control plane (via `control`)',
        },
        secret: {
          type: 'string',
          description: "ops secret and secret-set: the secret's name (never its value)",
        },
        path: { type: 'string', description: '`name:port` (or `address:port`), the name for DNS' },
        decision: { type: 'string', enum: ['allow', 'deny'] },
        rule: { type: 'integer', description: 'index of the deciding rule' },
        reason: { type: 'string' },
        name: { type: 'string' },
        address: { type: 'string' },
        port: { type: 'integer' },
        method: { type: 'string' },
        via: { type: 'string', enum: ['proxy', 'transparent', 'dns', 'control'] },
        bytes_up: { type: 'integer' },
        bytes_down: { type: 'integer' },
        duration_ms: { type: 'integer' },
      },
      required: ['time', 'op', 'path', 'decision', 'reason', 'via'],
    },
  },
});
