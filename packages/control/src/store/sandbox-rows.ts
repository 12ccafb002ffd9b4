// The sandbox row as the control plane sees it, and how its JSON and flag columns are stored: both
// backends (SQLite, PostgreSQL) keep the same text columns, so one encode/decode serves both.
import type { EnforcedLimits, PermissionRule, ResourceLimits } from '@agentfense/protocol';
import { NETWORK_NONE } from '@agentfense/network';
import type { NetworkPolicy } from '@agentfense/network';
import { secretBinding } from '@agentfense/network';
import type { SandboxInfo, SandboxState, StoredSecret } from '../sandboxes/types.js';

/**
 * A sandbox row, decoded: the JSON and flag columns come back typed (store/ is the only place that knows
 * how they are stored). Times are ms since the epoch.
 */
export interface SandboxRow {
  readonly id: string;
  readonly codebase_id: string;
  readonly state: SandboxState;
  readonly state_reason: string | null;
  readonly runtime: string;
  /** Container image (docker); null for the runtime's default. */
  readonly image: string | null;
  readonly rules: readonly PermissionRule[];
  /** Stored as `network_policy` (JSON) with `network` (0/1: mode other than none) beside it. */
  readonly network: NetworkPolicy;
  readonly resources: ResourceLimits;
  readonly env: Readonly<Record<string, string>>;
  readonly audit_allowed: boolean;
  readonly labels: Readonly<Record<string, string>>;
  readonly expires_at: number | null;
  readonly created_at: number;
  readonly updated_at: number;
  readonly started_at: number | null;
  readonly stopped_at: number | null;
  readonly owner_pid: number | null;
  readonly owner_start: string | null;
  /** Which ControlPlane object in the owning process (several may share a process). */
  readonly owner_instance: string | null;
  readonly worker_pid: number | null;
  readonly worker_start: string | null;
  readonly restart_count: number;
  readonly last_restart_at: number | null;
  readonly last_restart_reason: string | null;
  /** The runtime's EnforcedLimits at the last start; null before. */
  readonly limits: EnforcedLimits | null;
  /** Its secrets without their values (null in older rows: none). */
  readonly secrets: readonly StoredSecret[];
  /**
   * The codebase snapshot (blob store) a placed sandbox's node attached it on, kept across stops and
   * lost nodes since its delta is relative to it; null when it was attached on the codebase's path.
   */
  readonly snapshot_id: string | null;
}

/** The columns of a new sandbox. */
export type NewSandboxRow = Pick<
  SandboxRow,
  | 'id'
  | 'codebase_id'
  | 'state'
  | 'state_reason'
  | 'runtime'
  | 'image'
  | 'rules'
  | 'network'
  | 'resources'
  | 'env'
  | 'audit_allowed'
  | 'labels'
  | 'expires_at'
  | 'created_at'
  | 'updated_at'
  | 'secrets'
> &
  /** A sandbox owned from birth (a start follows at once): its owner, in the same statement. */
  Partial<Pick<SandboxRow, 'owner_pid' | 'owner_start' | 'owner_instance'>>;

/** Columns a caller may update, by name. */
export type SandboxPatch = Partial<Omit<SandboxRow, 'id' | 'codebase_id' | 'created_at' | 'updated_at'>>;

/** The row as the database holds it: JSON columns as text, flags as 0/1. */
export type StoredRow = Omit<
  SandboxRow,
  'rules' | 'network' | 'resources' | 'env' | 'audit_allowed' | 'labels' | 'limits' | 'secrets'
> & {
  readonly rules: string;
  readonly network: number;
  readonly network_policy: string | null;
  readonly resources: string;
  readonly env: string;
  readonly audit_allowed: number;
  readonly labels: string;
  readonly limits: string | null;
  readonly secrets: string | null;
};

/** JSON columns and how each is written (null stays SQL NULL). */
const JSON_COLUMNS = new Set<string>(['rules', 'resources', 'env', 'labels', 'limits', 'secrets']);
/** Boolean columns, stored as 0/1. */
const FLAG_COLUMNS = new Set<string>(['audit_allowed']);

/** Decodes a stored row; the JSON columns were written by encode() only, so their shape is known. */
export function decode(row: StoredRow): SandboxRow {
  const { network_policy: policy, ...rest } = row;
  return {
    ...rest,
    rules: JSON.parse(row.rules) as PermissionRule[],
    network:
      policy !== null
        ? (JSON.parse(policy) as NetworkPolicy)
        : row.network !== 0
          ? { mode: 'open', rules: [] }
          : NETWORK_NONE,
    resources: JSON.parse(row.resources) as ResourceLimits,
    env: JSON.parse(row.env) as Record<string, string>,
    audit_allowed: row.audit_allowed !== 0,
    labels: JSON.parse(row.labels) as Record<string, string>,
    limits: row.limits === null ? null : (JSON.parse(row.limits) as EnforcedLimits),
    secrets: row.secrets === null ? [] : (JSON.parse(row.secrets) as StoredSecret[]),
  };
}

/** Encodes typed column values for the database (JSON text, 0/1 flags). */
export function encode(values: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(values)) {
    if (value === undefined) continue;
    if (key === 'network') {
      const policy = value as NetworkPolicy;
      out['network'] = policy.mode === 'none' ? 0 : 1;
      out['network_policy'] = JSON.stringify(policy);
    } else if (JSON_COLUMNS.has(key)) out[key] = value === null ? null : JSON.stringify(value);
    else if (FLAG_COLUMNS.has(key)) out[key] = value === true ? 1 : 0;
    else out[key] = value;
  }
  return out;
}

export const PATCHABLE = new Set<string>([
  'state',
  'state_reason',
  'runtime',
  'rules',
  'network',
  'resources',
  'env',
  'audit_allowed',
  'labels',
  'expires_at',
  'started_at',
  'stopped_at',
  'owner_pid',
  'owner_start',
  'owner_instance',
  'worker_pid',
  'worker_start',
  'restart_count',
  'last_restart_at',
  'last_restart_reason',
  'limits',
  // A secret's kept source, replaced when setSecret gives it a value (bindings and never a value).
  'secrets',
  'snapshot_id',
]);

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** The public form of a row (env is never reported back). */
export function sandboxInfo(row: SandboxRow): SandboxInfo {
  return {
    id: row.id,
    codebaseId: row.codebase_id,
    state: row.state,
    stateReason: row.state_reason,
    runtime: row.runtime,
    image: row.image,
    rules: row.rules,
    network: row.network.mode !== 'none',
    networkPolicy: row.network,
    secrets: row.secrets.map((s) => ({
      ...secretBinding(s),
      source:
        s.source === null ? 'value' : 'env' in s.source ? 'env' : 'file' in s.source ? 'file' : 'command',
    })),
    resources: row.resources,
    limits: row.limits,
    labels: row.labels,
    auditAllowed: row.audit_allowed,
    expiresAt: iso(row.expires_at),
    createdAt: new Date(row.created_at).toISOString(),
    updatedAt: new Date(row.updated_at).toISOString(),
    startedAt: iso(row.started_at),
    stoppedAt: iso(row.stopped_at),
    restartCount: row.restart_count,
    lastRestartAt: iso(row.last_restart_at),
    lastRestartReason: row.last_restart_reason,
    ownerPid: row.owner_pid,
    workerPid: row.worker_pid,
  };
}
