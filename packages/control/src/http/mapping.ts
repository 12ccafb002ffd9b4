// The one place where the HTTP API's JSON (snake_case, the original's enum spellings, durations as
// "1.5s") meets the control plane's camelCase shapes. Handlers call these and nothing else converts.
import type {
  AuditEvent,
  ChangeEntry,
  CommitMode,
  CommitResult,
  ExecResult,
  PatternType,
  Permission,
  PermissionRule,
  ResourceLimits,
} from '@agentfense/protocol';
import { InvalidArgumentError, NotFoundError } from '@agentfense/protocol';
import { isId } from '../ids.js';
import type { IdKind } from '../ids.js';
import type { CodebaseInfo, FileEntry } from '../codebases/types.js';
import type { SandboxInfo, SandboxState } from '../sandboxes/types.js';
import type { SessionInfo } from '@agentfense/sessions';
import type { SessionExecResult } from '@agentfense/sessions';

// --- Enums ----------------------------------------------------------------------------------------

/** An enum as the original spells it on output, with the short forms also accepted on input. */
export interface WireEnum<T extends string> {
  /** Output spelling of each value (`SANDBOX_STATUS_RUNNING`). */
  readonly long: Readonly<Record<T, string>>;
  /** Every accepted input spelling: long forms, then short forms (`running`). */
  readonly accepted: readonly string[];
  /** The original's names by enum number (0 is `*_UNSPECIFIED`): numbers on input map through this. */
  readonly numbered: readonly string[];
  /** Input spelling → value; the `_UNSPECIFIED` form, where the original had one, maps to undefined. */
  parse(value: string): T | undefined;
  /** Value → output spelling. */
  format(value: T): string;
}

function wireEnum<T extends string>(
  prefix: string,
  values: readonly T[],
  options: { unspecified?: boolean } = {},
): WireEnum<T> {
  const long = Object.fromEntries(values.map((v) => [v, `${prefix}_${v.toUpperCase()}`])) as Record<
    T,
    string
  >;
  const byInput = new Map<string, T | undefined>();
  for (const v of values) {
    byInput.set(long[v], v);
    byInput.set(v.toLowerCase(), v);
  }
  if (options.unspecified === true) byInput.set(`${prefix}_UNSPECIFIED`, undefined);
  return {
    long,
    accepted: [...byInput.keys()],
    numbered: [`${prefix}_UNSPECIFIED`, ...values.map((v) => long[v])],
    parse(value) {
      if (!byInput.has(value)) {
        throw new InvalidArgumentError(
          `invalid ${prefix.toLowerCase()} ${JSON.stringify(value)}: expected one of ${[...byInput.keys()].join(', ')}`,
        );
      }
      return byInput.get(value);
    },
    format: (value) => long[value],
  };
}

export const PERMISSION = wireEnum<Permission>('PERMISSION', ['none', 'view', 'read', 'write']);
export const PATTERN_TYPE = wireEnum<PatternType>('PATTERN_TYPE', ['glob', 'directory', 'file'], {
  unspecified: true,
});
export const SANDBOX_STATUS = wireEnum<SandboxState>('SANDBOX_STATUS', [
  'PENDING',
  'RUNNING',
  'STOPPED',
  'ERROR',
]);
export const RUNTIME_TYPE = wireEnum<string>('RUNTIME_TYPE', ['bwrap', 'docker']);
export const SESSION_STATUS = wireEnum<'active' | 'closed'>('SESSION_STATUS', ['active', 'closed']);
export const COMMIT_MODE = {
  accepted: [
    'detect-conflicts',
    'last-writer-wins',
    'COMMIT_MODE_DETECT_CONFLICTS',
    'COMMIT_MODE_LAST_WRITER_WINS',
  ],
  parse(value: string): CommitMode {
    return value.startsWith('COMMIT_MODE_')
      ? (value.slice('COMMIT_MODE_'.length).toLowerCase().replaceAll('_', '-') as CommitMode)
      : (value as CommitMode);
  },
} as const;

// --- Durations ------------------------------------------------------------------------------------

/** A duration as the original's JSON has it ("1.5s", protobuf Duration) or a plain number of seconds. */
export type WireDuration = number | string;

const DURATION = /^(\d+(?:\.\d{1,9})?)s$/;

/** Seconds from a wire duration; InvalidArgumentError naming `field` when malformed or not positive. */
export function parseDuration(field: string, value: WireDuration): number {
  const match = typeof value === 'string' ? DURATION.exec(value) : null;
  const seconds = typeof value === 'number' ? value : match === null ? Number.NaN : Number(match[1]);
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw new InvalidArgumentError(
      `${field} must be a positive number of seconds or a duration like "30s" or "1.5s", got ${JSON.stringify(value)}`,
    );
  }
  return seconds;
}

/** Milliseconds as a protobuf-JSON duration ("0.012s"). */
export function formatDuration(ms: number): string {
  return `${Number((ms / 1000).toFixed(6))}s`;
}

// --- Requests -------------------------------------------------------------------------------------

/** A permission rule as clients send it. */
export interface WireRuleIn {
  readonly pattern: string;
  readonly type?: string;
  readonly permission: string;
  readonly priority?: number;
}

/** Rules from the wire; the engine validates the rest (and names the rule's index). */
export function rulesFromWire(rules: readonly WireRuleIn[]): PermissionRule[] {
  return rules.map((rule) => {
    const type = rule.type === undefined ? undefined : PATTERN_TYPE.parse(rule.type);
    const permission = PERMISSION.parse(rule.permission);
    if (permission === undefined) throw new InvalidArgumentError('a rule needs a permission');
    return {
      pattern: rule.pattern,
      permission,
      ...(type === undefined ? {} : { type }),
      ...(rule.priority === undefined ? {} : { priority: rule.priority }),
    };
  });
}

export interface WireResources {
  readonly memory_bytes?: number;
  readonly cpu_quota?: number;
  readonly cpu_shares?: number;
  readonly pids_limit?: number;
  readonly disk_bytes?: number;
  readonly tmp_bytes?: number;
}

export function resourcesFromWire(r: WireResources): ResourceLimits {
  return {
    ...(r.memory_bytes === undefined ? {} : { memoryBytes: r.memory_bytes }),
    ...(r.cpu_quota === undefined ? {} : { cpuQuota: r.cpu_quota }),
    ...(r.cpu_shares === undefined ? {} : { cpuShares: r.cpu_shares }),
    ...(r.pids_limit === undefined ? {} : { pidsLimit: r.pids_limit }),
    ...(r.disk_bytes === undefined ? {} : { diskBytes: r.disk_bytes }),
    ...(r.tmp_bytes === undefined ? {} : { tmpBytes: r.tmp_bytes }),
  };
}

/** Every limit, 0 where none is set (the original's "no limit", and protojson emits defaults). */
export function resourcesToWire(r: ResourceLimits): Required<WireResources> {
  return {
    memory_bytes: r.memoryBytes ?? 0,
    cpu_quota: r.cpuQuota ?? 0,
    cpu_shares: r.cpuShares ?? 0,
    pids_limit: r.pidsLimit ?? 0,
    disk_bytes: r.diskBytes ?? 0,
    tmp_bytes: r.tmpBytes ?? 0,
  };
}

/** Labels in a query string: `labels=k:v,k2:v2` and/or repeated `label=k:v` (also `k=v`). */
export function labelsFromQuery(values: readonly string[]): Record<string, string> | undefined {
  const labels: Record<string, string> = {};
  let any = false;
  for (const value of values) {
    for (const pair of value.split(',')) {
      if (pair === '') continue;
      const at = pair.search(/[:=]/);
      if (at <= 0) {
        throw new InvalidArgumentError(`invalid label filter ${JSON.stringify(pair)}: expected key:value`);
      }
      labels[pair.slice(0, at)] = pair.slice(at + 1);
      any = true;
    }
  }
  return any ? labels : undefined;
}

// --- Responses ------------------------------------------------------------------------------------

export function codebaseToWire(c: CodebaseInfo): Record<string, unknown> {
  return {
    id: c.id,
    name: c.name,
    // A string field of the original: "" when unset, as protojson emits it.
    owner_id: c.ownerId ?? '',
    // Null for a linked codebase (a host directory used in place is never walked).
    size: c.sizeBytes,
    file_count: c.fileCount,
    kind: c.kind,
    created_at: c.createdAt,
    updated_at: c.updatedAt,
  };
}

export function fileToWire(f: FileEntry): Record<string, unknown> {
  return { path: f.path, size: f.size, is_dir: f.isDir, modified_at: f.modifiedAt };
}

export function ruleToWire(rule: PermissionRule): Record<string, unknown> {
  return {
    pattern: rule.pattern,
    ...(rule.type === undefined ? {} : { type: PATTERN_TYPE.format(rule.type) }),
    permission: PERMISSION.format(rule.permission),
    priority: rule.priority ?? 0,
  };
}

export function sandboxToWire(s: SandboxInfo): Record<string, unknown> {
  return {
    id: s.id,
    codebase_id: s.codebaseId,
    permissions: s.rules.map(ruleToWire),
    status: SANDBOX_STATUS.format(s.state),
    status_reason: s.stateReason,
    labels: s.labels,
    created_at: s.createdAt,
    updated_at: s.updatedAt,
    started_at: s.startedAt,
    stopped_at: s.stoppedAt,
    expires_at: s.expiresAt,
    runtime: s.runtime in RUNTIME_TYPE.long ? RUNTIME_TYPE.format(s.runtime) : s.runtime,
    image: s.image ?? '',
    resources: resourcesToWire(s.resources),
    network: s.network,
    network_policy: s.networkPolicy,
    secrets: s.secrets,
    audit_allowed: s.auditAllowed,
    restart_count: s.restartCount,
    last_restart_at: s.lastRestartAt,
    last_restart_reason: s.lastRestartReason,
  };
}

/** How command output is put into JSON: text (invalid UTF-8 replaced) or exact bytes as base64. */
export type OutputEncoding = 'utf8' | 'base64';

export function execResultToWire(r: ExecResult, encoding: OutputEncoding): Record<string, unknown> {
  return {
    stdout: r.stdout.toString(encoding),
    stderr: r.stderr.toString(encoding),
    exit_code: r.exitCode,
    duration: formatDuration(r.durationMs),
    duration_ms: r.durationMs,
    timed_out: r.timedOut,
    signal: r.signal,
    cancelled: r.cancelled,
    oom_killed: r.oomKilled,
    encoding,
  };
}

export function sessionExecResultToWire(
  r: SessionExecResult,
  encoding: OutputEncoding,
): Record<string, unknown> {
  return {
    stdout: r.stdout.toString(encoding),
    stderr: r.stderr.toString(encoding),
    exit_code: r.exitCode,
    duration: formatDuration(r.durationMs),
    duration_ms: r.durationMs,
    timed_out: r.timedOut,
    truncated: r.truncated,
    session_closed: r.sessionClosed,
    encoding,
  };
}

export function sessionToWire(s: SessionInfo, closedAt: Date | null = null): Record<string, unknown> {
  return {
    id: s.id,
    sandbox_id: s.sandboxId,
    status: SESSION_STATUS.format(s.status === 'open' ? 'active' : 'closed'),
    shell: s.shell,
    created_at: s.createdAt.toISOString(),
    closed_at: closedAt === null ? null : closedAt.toISOString(),
    closed_reason: s.closedReason,
    last_active_at: s.lastActiveAt.toISOString(),
  };
}

export function changeToWire(c: ChangeEntry): Record<string, unknown> {
  return {
    path: c.path,
    kind: c.kind,
    type: c.type,
    size: c.size,
    // What a commit does besides the content (null where it does not apply): a review must show it.
    mode: c.mode ?? null,
    old_mode: c.oldMode ?? null,
    target: c.target ?? null,
  };
}

export function commitToWire(r: CommitResult): Record<string, unknown> {
  return {
    applied: r.applied.map(changeToWire),
    conflicts: r.conflicts.map((c) => ({ ...c })),
    skipped: (r.skipped ?? []).map((c) => ({ ...c })),
    changed: (r.changed ?? []).map((c) => ({ ...c })),
    // A client must be able to tell a commit cut short by a stop or destroy from a complete one.
    interrupted: r.interrupted ?? '',
  };
}

export function auditToWire(e: AuditEvent): Record<string, unknown> {
  return {
    seq: e.seq,
    time: new Date(e.time).toISOString(),
    op: e.op,
    path: e.path,
    target: e.target ?? null,
    decision: e.decision,
    permission: PERMISSION.format(e.permission),
    errno: e.errno ?? null,
    pid: e.pid ?? null,
    similar: e.similar ?? 1,
  };
}

// --- Ids in URLs ----------------------------------------------------------------------------------

/**
 * An id from a URL. One that is not in our format names nothing we have: NOT_FOUND, as the original
 * answers for any unknown id (its own ids, `sb_0123456789abcdef`, included), never a 400. The check still
 * runs before the id reaches a path or a query.
 */
export function pathId(kind: IdKind, value: string): string {
  const shown = value.slice(0, 80);
  if (!isId(kind, value)) {
    throw new NotFoundError(`${kind} ${JSON.stringify(shown)} not found`, { details: { id: shown } });
  }
  return value;
}
