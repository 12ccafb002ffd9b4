// How the CLI shows the network's audit records and decisions (`audit --network`, `explain --host`).
import { escapeLine } from '@agentfense/protocol/core';
import type { NetworkAuditEvent } from '@agentfense/network';
import { formatTable } from './io.js';

/** One line per record: time, decision, what, where to, the deciding rule, traffic. */
export function formatNetworkAudit(events: readonly NetworkAuditEvent[]): string {
  return formatTable(
    events.map((e) => [
      new Date(e.time).toISOString(),
      e.decision.toUpperCase(),
      e.op === 'dns' ? 'dns' : `${e.via}${e.method === undefined ? '' : ` ${e.method}`}`,
      // Names and reasons come from the sandbox (a TLS server name, a Host header): escaped.
      escapeLine(e.path),
      e.address ?? '',
      escapeLine(e.reason),
      e.bytesUp === undefined ? '' : `up ${e.bytesUp} B, down ${e.bytesDown ?? 0} B, ${e.durationMs ?? 0} ms`,
    ]),
  );
}
