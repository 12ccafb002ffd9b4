// Where a control plane's sandboxes run, as one interface: on this host (the SandboxManager, which has
// always done it: a worker, mounts and a runtime per sandbox in this process) or on cluster nodes through
// an orchestrator and the node agents (orchestrated.ts). The ControlPlane sends the lifecycle, commands
// and delta operations to its backend, so the faces (HTTP, gRPC, CLI, library, MCP) do not know which
// one it is. docs/decisions.md, "serve places sandboxes through a backend interface".
import type { AuditQuery, NetworkAuditQuery } from '@agentfense/audit-trail';
import type { NetworkAuditEvent } from '@agentfense/network';
import type { AuditEvent, ChangeEntry, CommitMode, CommitResult, ExecResult } from '@agentfense/protocol';
import type { SandboxExecOptions, SandboxInfo } from '../sandboxes/types.js';

export interface SandboxBackend {
  /** Runs the sandbox (PENDING or STOPPED to RUNNING); a sandbox already running is returned as it is. */
  start(id: string): Promise<SandboxInfo>;
  /** Stops it; the delta stays where the sandbox ran. */
  stop(id: string, options?: { reason?: string }): Promise<SandboxInfo>;
  /** Stops and forgets it (record and files). */
  destroy(id: string, options?: { keepDelta?: boolean }): Promise<void>;
  exec(id: string, command: string | readonly string[], options?: SandboxExecOptions): Promise<ExecResult>;
  changes(id: string): Promise<readonly ChangeEntry[]>;
  diff(
    id: string,
    options?: { paths?: readonly string[] },
  ): Promise<{ diff: string; binary: readonly string[] }>;
  commit(id: string, options?: { mode?: CommitMode; paths?: readonly string[] }): Promise<CommitResult>;
  /** Drops the delta's changes (all, or under `paths`). */
  discard(id: string, options?: { paths?: readonly string[] }): Promise<void>;
  /** The sandbox's audit trail: the worker's decisions, or with `kind: 'network'` the policy point's. */
  audit(id: string, query?: AuditQuery | NetworkAuditQuery): Promise<AuditRecords>;
  readFile(id: string, path: string): Promise<Buffer>;
  writeFile(id: string, path: string, data: Uint8Array | string): Promise<void>;
}

/** What an audit query answers: file decisions, or network records for a `kind: 'network'` query. */
export type AuditRecords = AuditEvent[] | NetworkAuditEvent[];
