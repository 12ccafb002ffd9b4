// The one place where sandbox.v1 messages (generated from proto/sandbox/v1/*.proto) meet the control
// plane's camelCase shapes. Handlers call these and nothing else converts.
import { constants } from 'node:os';
import type {
  ExecResult as RuntimeExecResult,
  PermissionRule as Rule,
  ResourceLimits,
} from '@agentfense/protocol';
import { InvalidArgumentError, NotFoundError } from '@agentfense/protocol';
import type {
  NetworkAuditEvent,
  NetworkMode,
  NetworkPolicy as Policy,
  NetworkPolicyInput,
  SecretInput,
} from '@agentfense/network';
import type { CodebaseInfo, FileEntry } from '../codebases/types.js';
import { isId, type IdKind } from '../ids.js';
import type { AuditQuery } from '@agentfense/audit-trail';
import type { SandboxInfo, SandboxState } from '../sandboxes/types.js';
import type { SessionExecResult } from '@agentfense/sessions';
import type { SessionInfo } from '@agentfense/sessions';
import type { Duration } from './gen/google/protobuf/duration.js';
import type { Codebase, FileInfo } from './gen/sandbox/v1/codebase.js';
import type {
  GetNetworkAuditRequest,
  NetworkAuditRecord,
  NetworkPolicy,
  NetworkRule,
  Secret,
} from './gen/sandbox/v1/network.js';
import { PatternType, Permission, SandboxStatus, SessionStatus } from './gen/sandbox/v1/common.js';
import type { PermissionRule } from './gen/sandbox/v1/common.js';
import { RuntimeType } from './gen/sandbox/v1/sandbox.js';
import type {
  ExecResult,
  ResourceLimits as WireResources,
  Sandbox,
  Session,
} from './gen/sandbox/v1/sandbox.js';

// --- Ids ------------------------------------------------------------------------------------------

/**
 * An id from a request. Empty: INVALID_ARGUMENT naming the field, as the original says. Any other id
 * that is not one of ours names nothing here: NOT_FOUND, as the original answers for every unknown id
 * (its own format, `sb_0123456789abcdef`, included) and as the REST face does (http/mapping.ts pathId).
 * The check still runs before the id reaches a path or a query.
 */
export function requestId(kind: IdKind, field: string, value: string): string {
  if (value === '') throw new InvalidArgumentError(`${field} is required`);
  // Sliced before the guard: isId narrows a string it rejects to never.
  const shown = value.slice(0, 80);
  if (isId(kind, value)) return value;
  throw new NotFoundError(`${kind} ${JSON.stringify(shown)} not found`, { details: { id: shown } });
}

// --- Scalars --------------------------------------------------------------------------------------

/** Milliseconds of a protobuf Duration; undefined when absent or zero (no limit), error when negative. */
export function durationMs(field: string, d: Duration | undefined): number | undefined {
  if (d === undefined) return undefined;
  const ms = d.seconds * 1000 + d.nanos / 1e6;
  if (!Number.isFinite(ms) || ms < 0 || d.nanos < -999_999_999 || d.nanos > 999_999_999) {
    throw new InvalidArgumentError(
      `${field} must be a non-negative duration, got ${d.seconds}s ${d.nanos}ns`,
    );
  }
  // A duration under a millisecond still limits: round up so 1 ns never means "no timeout".
  return ms === 0 ? undefined : Math.ceil(ms);
}

/** A protobuf Duration of `ms` milliseconds. */
export function toDuration(ms: number): Duration {
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

function date(iso: string | null): Date | undefined {
  return iso === null ? undefined : new Date(iso);
}

/** Proto3 strings have no "absent": empty means not given. */
export function optional(value: string): string | undefined {
  return value === '' ? undefined : value;
}

/** A codebase path as the original takes it (`src/a.py`; a leading `/` is tolerated, `/workspace/` too). */
export function codebasePath(value: string): string {
  return value.replace(/^\/workspace(?=\/|$)/, '').replace(/^\/+/, '');
}

// --- Enums ----------------------------------------------------------------------------------------

const PERMISSION_IN: Partial<Record<Permission, Rule['permission']>> = {
  [Permission.PERMISSION_NONE]: 'none',
  [Permission.PERMISSION_VIEW]: 'view',
  [Permission.PERMISSION_READ]: 'read',
  [Permission.PERMISSION_WRITE]: 'write',
};
const PERMISSION_OUT: Record<Rule['permission'], Permission> = {
  none: Permission.PERMISSION_NONE,
  view: Permission.PERMISSION_VIEW,
  read: Permission.PERMISSION_READ,
  write: Permission.PERMISSION_WRITE,
};
const PATTERN_IN: Partial<Record<PatternType, NonNullable<Rule['type']>>> = {
  [PatternType.PATTERN_TYPE_GLOB]: 'glob',
  [PatternType.PATTERN_TYPE_DIRECTORY]: 'directory',
  [PatternType.PATTERN_TYPE_FILE]: 'file',
};
const PATTERN_OUT: Record<NonNullable<Rule['type']>, PatternType> = {
  glob: PatternType.PATTERN_TYPE_GLOB,
  directory: PatternType.PATTERN_TYPE_DIRECTORY,
  file: PatternType.PATTERN_TYPE_FILE,
};
const STATUS_OUT: Record<SandboxState, SandboxStatus> = {
  PENDING: SandboxStatus.SANDBOX_STATUS_PENDING,
  RUNNING: SandboxStatus.SANDBOX_STATUS_RUNNING,
  STOPPED: SandboxStatus.SANDBOX_STATUS_STOPPED,
  ERROR: SandboxStatus.SANDBOX_STATUS_ERROR,
};
const RUNTIME_IN: Partial<Record<RuntimeType, string>> = {
  [RuntimeType.RUNTIME_TYPE_BWRAP]: 'bwrap',
  [RuntimeType.RUNTIME_TYPE_DOCKER]: 'docker',
};
const RUNTIME_OUT: Record<string, RuntimeType> = {
  bwrap: RuntimeType.RUNTIME_TYPE_BWRAP,
  docker: RuntimeType.RUNTIME_TYPE_DOCKER,
};

/** The runtime name of a request's RuntimeType; undefined for UNSPECIFIED (the server's default). */
export function runtimeFromProto(value: RuntimeType): string | undefined {
  if (value === RuntimeType.RUNTIME_TYPE_UNSPECIFIED) return undefined;
  const name = RUNTIME_IN[value];
  if (name === undefined) {
    throw new InvalidArgumentError(`runtime ${value} is not a RuntimeType (1 = BWRAP, 2 = DOCKER)`);
  }
  return name;
}

/** Rules from a request; the engine validates patterns (and names the rule's index). */
export function rulesFromProto(rules: readonly PermissionRule[]): Rule[] {
  return rules.map((rule, index) => {
    const permission = PERMISSION_IN[rule.permission];
    if (permission === undefined) {
      throw new InvalidArgumentError(
        `permissions[${index}].permission must be PERMISSION_NONE, _VIEW, _READ or _WRITE, got ${rule.permission}`,
      );
    }
    const type = rule.type === PatternType.PATTERN_TYPE_UNSPECIFIED ? undefined : PATTERN_IN[rule.type];
    if (type === undefined && rule.type !== PatternType.PATTERN_TYPE_UNSPECIFIED) {
      throw new InvalidArgumentError(`permissions[${index}].type ${rule.type} is not a PatternType`);
    }
    return {
      pattern: rule.pattern,
      permission,
      ...(type === undefined ? {} : { type }),
      ...(rule.priority === 0 ? {} : { priority: rule.priority }),
    };
  });
}

/** Resource limits from a request: a zero field is "not set", as proto3 cannot tell them apart. */
export function resourcesFromProto(r: WireResources | undefined): ResourceLimits | undefined {
  if (r === undefined) return undefined;
  const out: { -readonly [K in keyof ResourceLimits]: number } = {};
  const fields = [
    ['memoryBytes', 'memory_bytes'],
    ['cpuQuota', 'cpu_quota'],
    ['cpuShares', 'cpu_shares'],
    ['pidsLimit', 'pids_limit'],
  ] as const;
  for (const [key, name] of fields) {
    const value = r[key];
    if (value < 0) throw new InvalidArgumentError(`resources.${name} must not be negative, got ${value}`);
    if (value > 0) out[key] = value;
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

// --- Network policy -------------------------------------------------------------------------------

/**
 * A request's policy in the shape the HTTP face's JSON gives the control plane, which validates it there
 * and here alike, so an invalid policy gets the same message on both faces (`network rule 0: ...`). Proto3
 * defaults ("", 0, empty lists) are left out, as absent JSON fields are.
 */
export function networkPolicyFromProto(policy: NetworkPolicy | undefined): NetworkPolicyInput {
  if (policy === undefined) return {};
  const rules = policy.rules.map((r: NetworkRule) => ({
    action: r.action,
    ...(r.host === '' ? {} : { host: r.host }),
    ...(r.cidr === '' ? {} : { cidr: r.cidr }),
    ...(r.ports.length === 0 ? {} : { ports: r.ports }),
    ...(r.methods.length === 0 ? {} : { methods: r.methods }),
    ...(r.priority === 0 ? {} : { priority: r.priority }),
  }));
  return {
    // Not checked here: validateNetworkPolicy names a mode that is none of the three.
    ...(policy.mode === '' ? {} : { mode: policy.mode as NetworkMode }),
    ...(rules.length === 0 ? {} : { rules }),
    ...(policy.presets.length === 0 ? {} : { presets: policy.presets }),
  };
}

/** The policy in force: presets are already rules, so `presets` is empty. */
export function networkPolicyToProto(policy: Policy): NetworkPolicy {
  return {
    mode: policy.mode,
    rules: policy.rules.map((r) => ({
      action: r.action,
      host: r.host ?? '',
      cidr: r.cidr ?? '',
      ports: [...(r.ports ?? [])],
      methods: [...(r.methods ?? [])],
      priority: r.priority ?? 0,
    })),
    presets: [],
  };
}

/** The audit query of GetNetworkAudit: limit 0 is the default; the control plane refuses a negative one. */
export function networkAuditQuery(req: GetNetworkAuditRequest): AuditQuery {
  if (req.decision !== '' && req.decision !== 'allow' && req.decision !== 'deny') {
    throw new InvalidArgumentError(
      `decision must be "allow", "deny" or empty (both), got ${JSON.stringify(req.decision.slice(0, 40))}`,
    );
  }
  return {
    ...(req.decision === '' ? {} : { decision: req.decision }),
    ...(req.limit === 0 ? {} : { limit: req.limit }),
  };
}

/** A create's secret: proto3's empty lists and strings are "not given" (validated by the control plane). */
export function secretFromProto(s: Secret): SecretInput {
  return {
    name: s.name,
    hosts: s.hosts,
    ...(s.paths.length === 0 ? {} : { paths: s.paths }),
    ...(s.methods.length === 0 ? {} : { methods: s.methods }),
    ...(s.header === undefined ? {} : { header: { name: s.header.name, value: s.header.value } }),
    value: s.value,
  };
}

export function networkRecordToProto(e: NetworkAuditEvent): NetworkAuditRecord {
  return {
    time: new Date(e.time),
    op: e.op,
    path: e.path,
    decision: e.decision,
    rule: e.rule,
    reason: e.reason,
    name: e.name ?? '',
    address: e.address ?? '',
    port: e.port ?? 0,
    method: e.method ?? '',
    via: e.via,
    bytesUp: e.bytesUp ?? 0,
    bytesDown: e.bytesDown ?? 0,
    durationMs: e.durationMs ?? 0,
    secret: e.secret ?? '',
  };
}

// --- Responses ------------------------------------------------------------------------------------

export function codebaseToProto(c: CodebaseInfo): Codebase {
  return {
    id: c.id,
    name: c.name,
    ownerId: c.ownerId ?? '',
    // A linked codebase (a host directory used in place) is never walked: 0, as proto3 has no null.
    size: c.sizeBytes ?? 0,
    fileCount: c.fileCount ?? 0,
    createdAt: new Date(c.createdAt),
    updatedAt: new Date(c.updatedAt),
  };
}

/** A listing entry with the original's relative path (`src/a.py`) and base name. */
export function fileToProto(f: FileEntry): FileInfo {
  const path = f.path.replace(/^\/+/, '');
  return {
    path,
    name: path.slice(path.lastIndexOf('/') + 1),
    isDir: f.isDir,
    size: f.size,
    modifiedAt: new Date(f.modifiedAt),
  };
}

export function sandboxToProto(s: SandboxInfo): Sandbox {
  const r = s.resources;
  return {
    id: s.id,
    codebaseId: s.codebaseId,
    permissions: s.rules.map((rule) => ({
      pattern: rule.pattern,
      type: rule.type === undefined ? PatternType.PATTERN_TYPE_UNSPECIFIED : PATTERN_OUT[rule.type],
      permission: PERMISSION_OUT[rule.permission],
      priority: rule.priority ?? 0,
    })),
    status: STATUS_OUT[s.state],
    labels: { ...s.labels },
    createdAt: new Date(s.createdAt),
    startedAt: date(s.startedAt),
    stoppedAt: date(s.stoppedAt),
    expiresAt: date(s.expiresAt),
    runtime: RUNTIME_OUT[s.runtime] ?? RuntimeType.RUNTIME_TYPE_UNSPECIFIED,
    image: s.image ?? '',
    resources: {
      memoryBytes: r.memoryBytes ?? 0,
      cpuQuota: r.cpuQuota ?? 0,
      cpuShares: r.cpuShares ?? 0,
      pidsLimit: r.pidsLimit ?? 0,
    },
    networkPolicy: networkPolicyToProto(s.networkPolicy),
    secrets: s.secrets.map((secret) => ({
      name: secret.name,
      hosts: [...secret.hosts],
      paths: [...(secret.paths ?? [])],
      methods: [...(secret.methods ?? [])],
      ...(secret.header === undefined ? {} : { header: { ...secret.header } }),
      source: secret.source,
    })),
  };
}

export function sessionToProto(s: SessionInfo): Session {
  const closed = s.status === 'closed';
  return {
    id: s.id,
    sandboxId: s.sandboxId,
    status: closed ? SessionStatus.SESSION_STATUS_CLOSED : SessionStatus.SESSION_STATUS_ACTIVE,
    shell: s.shell,
    createdAt: s.createdAt,
    // The session records when it was last used; once closed, that is when it stopped taking commands.
    closedAt: closed ? s.lastActiveAt : undefined,
  };
}

/**
 * The exit code a client sees: the status, or for a command killed by a signal 128 + its number, as a
 * shell reports it (the original's field is a plain int32 with no room for "no status").
 */
export function exitCode(code: number | null, signal: string | null): number {
  if (code !== null) return code;
  const number = signal === null ? undefined : constants.signals[signal as keyof typeof constants.signals];
  return number === undefined ? -1 : 128 + number;
}

/** An exec result for the wire: output as UTF-8 text, as the original's string fields carry it. */
export function execResultToProto(r: RuntimeExecResult | SessionExecResult): ExecResult {
  return {
    stdout: r.stdout.toString('utf8'),
    stderr: r.stderr.toString('utf8'),
    exitCode: exitCode(r.exitCode, 'signal' in r ? r.signal : null),
    duration: toDuration(r.durationMs),
  };
}
