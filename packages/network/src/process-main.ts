// The policy point's process: one per sandbox with a network policy, started by the control plane
// (host.ts) with an IPC channel. It runs as long as that channel is open, so it never outlives the
// process that started it. Audit records leave in batches.
import type { NetworkAuditEvent } from './audit.js';
import type { NetworkPolicy } from './policy.js';
import { netnsAddon } from './native.js';
import { PolicyPoint } from './policy-point.js';
import type { SecretSetOptions } from './secret-set.js';
import type { SandboxSecret } from './secrets.js';

export type ToPolicyPoint =
  | {
      readonly type: 'start';
      readonly netnsPath: string;
      readonly policy: NetworkPolicy;
      readonly maxConnections: number;
      readonly hostsFile?: string;
      /** Secret values and the sandbox CA's key: they reach this process over its IPC channel alone. */
      readonly secrets?: SecretSetOptions;
    }
  | { readonly type: 'policy'; readonly id: number; readonly policy: NetworkPolicy }
  | { readonly type: 'flush'; readonly id: number }
  /** A secret's value given or replaced while the sandbox runs (over this channel alone, like `start`). */
  | { readonly type: 'secret'; readonly id: number; readonly secret: SandboxSecret }
  | { readonly type: 'stop' };

export type FromPolicyPoint =
  | { readonly type: 'ready' }
  | { readonly type: 'error'; readonly message: string }
  | { readonly type: 'audit'; readonly events: readonly NetworkAuditEvent[] }
  | { readonly type: 'policy-applied'; readonly id: number; readonly closed: number };

const AUDIT_BATCH_MS = 50;

function send(message: FromPolicyPoint, then?: () => void): void {
  process.send?.(message, undefined, {}, () => then?.());
}

let point: PolicyPoint | undefined;
let pending: NetworkAuditEvent[] = [];
let flushTimer: NodeJS.Timeout | undefined;

function flush(): void {
  clearTimeout(flushTimer);
  flushTimer = undefined;
  if (pending.length === 0) return;
  const events = pending;
  pending = [];
  send({ type: 'audit', events });
}

function audit(event: NetworkAuditEvent): void {
  pending.push(event);
  flushTimer ??= setTimeout(flush, AUDIT_BATCH_MS);
}

// Before any secret arrives: no core dump of this process, and its /proc is root's alone.
netnsAddon().notDumpable();

process.on('message', (message: ToPolicyPoint) => {
  if (message.type === 'start') {
    try {
      point = new PolicyPoint({
        netnsPath: message.netnsPath,
        policy: message.policy,
        maxConnections: message.maxConnections,
        ...(message.hostsFile === undefined ? {} : { hostsFile: message.hostsFile }),
        ...(message.secrets === undefined ? {} : { secrets: message.secrets }),
        audit,
      });
      send({ type: 'ready' });
    } catch (err) {
      send({ type: 'error', message: (err as Error).message }, () => process.exit(1));
    }
  } else if (message.type === 'policy') {
    const closed = point?.setPolicy(message.policy) ?? 0;
    send({ type: 'policy-applied', id: message.id, closed });
  } else if (message.type === 'secret') {
    const given = point?.setSecret(message.secret) ?? false;
    send({ type: 'policy-applied', id: message.id, closed: given ? 1 : 0 });
  } else if (message.type === 'flush') {
    flush();
    send({ type: 'policy-applied', id: message.id, closed: 0 });
  } else if (message.type === 'stop') {
    point?.close();
    flush();
    send({ type: 'policy-applied', id: 0, closed: 0 }, () => process.exit(0));
  }
});

process.on('disconnect', () => {
  point?.close();
  process.exit(0);
});
