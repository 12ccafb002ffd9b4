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
      description: 'one connection, plain-HTTP request or refused DNS question',
      properties: {
        time: { type: 'string', description: 'RFC 3339 time' },
        op: { type: 'string', enum: ['connect', 'dns'] },
        path: { type: 'string', description: '`name:port` (or `address:port`), the name for DNS' },
        decision: { type: 'string', enum: ['allow', 'deny'] },
        rule: { type: 'integer', description: 'index of the deciding rule' },
        reason: { type: 'string' },
        name: { type: 'string' },
        address: { type: 'string' },
        port: { type: 'integer' },
        method: { type: 'string' },
        via: { type: 'string', enum: ['proxy', 'transparent', 'dns'] },
        bytes_up: { type: 'integer' },
        bytes_down: { type: 'integer' },
        duration_ms: { type: 'integer' },
      },
      required: ['time', 'op', 'path', 'decision', 'reason', 'via'],
    },
  },
});
