// JSON Schemas of the HTTP API's requests and responses. Fastify validates requests with them (ajv),
// and the OpenAPI document is built from them, so the documentation is the validation. Responses are
// serialized with plain JSON.stringify; the response schemas are documentation, checked by the tests.
import {
  COMMIT_MODE,
  PATTERN_TYPE,
  PERMISSION,
  RUNTIME_TYPE,
  SANDBOX_STATUS,
  SESSION_STATUS,
} from './mapping.js';
import { NetworkPolicyIn, NetworkPolicyOut, SecretIn, SecretOut } from './network-schemas.js';
import { object, outObject } from './schema-builders.js';
import type { Schema } from './schema-builders.js';

export type { Schema } from './schema-builders.js';

const str = { type: 'string' } as const;
const nullableStr = { type: ['string', 'null'] } as const;
const time = { type: 'string', description: 'RFC 3339 time' } as const;
const nullableTime = {
  type: ['string', 'null'],
  description: 'RFC 3339 time, null when not (yet) applicable',
} as const;
const stringMap = { type: 'object', additionalProperties: { type: 'string' } } as const;
const duration = {
  type: ['number', 'string'],
  'x-duration': true,
  description:
    'Seconds, as a number (`30`, `1.5`) or as protobuf JSON spells a Duration (`"30s"`, `"1.5s"`).',
} as const;
const encoding = {
  type: 'string',
  enum: ['utf8', 'base64'],
  description:
    'How stdout/stderr are put in the JSON: UTF-8 text (default; invalid bytes replaced) or base64.',
} as const;

// --- Common -----------------------------------------------------------------------------------------

/** google.rpc.Status as grpc-gateway writes it. */
export const ErrorBody: Schema = {
  title: 'Status',
  type: 'object',
  properties: {
    code: { type: 'integer', description: 'the gRPC status code (5 NOT_FOUND, 3 INVALID_ARGUMENT, ...)' },
    message: str,
    details: {
      type: 'array',
      description:
        'google.protobuf.Any values; always one google.rpc.ErrorInfo whose `reason` is the AgentFense error code (AF_NOT_FOUND, ...) and whose `metadata` carries the error details',
      items: { type: 'object' },
    },
  },
  required: ['code', 'message', 'details'],
  additionalProperties: false,
};

/** An int64 field: a string in answers, a string or a number in requests. */
const int64 = (extra: Record<string, unknown> = {}): Schema => ({
  type: 'integer',
  'x-int64': true,
  ...extra,
});
/** An enum field: the original's names (and our short forms) or its numbers. */
const enumIn = (
  e: { accepted: readonly string[]; numbered: readonly string[] },
  extra: Record<string, unknown> = {},
): Schema => ({
  type: 'string',
  enum: [...e.accepted],
  'x-enum': [...e.numbered],
  ...extra,
});

export const Empty: Schema = { title: 'Empty', type: 'object', properties: {}, additionalProperties: false };

export const IdParams = (what: string, prefix: string): Schema => ({
  type: 'object',
  properties: { id: { type: 'string', description: `the ${what} id, ${prefix}_<uuid>` } },
  required: ['id'],
  additionalProperties: false,
});

const pageQuery = {
  page_size: { type: 'integer', minimum: 1, maximum: 1000, description: 'default 100' },
  page_token: { type: 'string', description: 'next_page_token of the previous page' },
} as const;

// --- Codebases --------------------------------------------------------------------------------------

export const CreateCodebaseBody = object(
  'CreateCodebaseRequest',
  { name: { type: 'string', minLength: 1, maxLength: 256 }, owner_id: str },
  ['name'],
);

export const Codebase = outObject('Codebase', {
  id: str,
  name: str,
  owner_id: nullableStr,
  size: {
    type: ['integer', 'null'],
    'x-int64': true,
    description: 'total bytes of regular files (null for a linked codebase)',
  },
  file_count: { type: ['integer', 'null'], description: 'regular files (null for a linked codebase)' },
  kind: { type: 'string', enum: ['stored', 'linked'] },
  created_at: time,
  updated_at: time,
});

export const ListCodebasesQuery = object('ListCodebasesQuery', { owner_id: str, ...pageQuery });

export const CodebaseList = outObject('ListCodebasesResponse', {
  codebases: { type: 'array', items: Codebase },
  next_page_token: { type: 'string', description: 'empty on the last page' },
});

export const FileEntry = outObject('FileInfo', {
  path: { type: 'string', description: 'relative to the codebase root' },
  size: int64(),
  is_dir: { type: 'boolean' },
  modified_at: time,
});

export const ListFilesQuery = object('ListFilesQuery', {
  path: { type: 'string', description: 'directory to list, relative to the root; default the root' },
  recursive: { type: 'boolean' },
});

export const FileList = outObject('ListFilesResponse', { files: { type: 'array', items: FileEntry } });

export const FileParams: Schema = {
  type: 'object',
  properties: {
    id: { type: 'string', description: 'the codebase id, cb_<uuid>' },
    '*': { type: 'string', description: 'the file path relative to the codebase root (may contain "/")' },
  },
  required: ['id', '*'],
  additionalProperties: false,
};

// --- Sandboxes --------------------------------------------------------------------------------------

export const PermissionRuleIn = object(
  'PermissionRuleInput',
  {
    pattern: { type: 'string', minLength: 1 },
    type: enumIn(PATTERN_TYPE, { description: 'inferred from the pattern when absent' }),
    permission: enumIn(PERMISSION),
    priority: { type: 'integer' },
  },
  ['pattern', 'permission'],
);

const PermissionRuleOut: Schema = {
  title: 'PermissionRule',
  type: 'object',
  properties: {
    pattern: str,
    type: { type: 'string', enum: Object.values(PATTERN_TYPE.long) },
    permission: { type: 'string', enum: Object.values(PERMISSION.long) },
    priority: { type: 'integer' },
  },
  required: ['pattern', 'permission', 'priority'],
  additionalProperties: false,
};

const positiveInt = { type: 'integer', minimum: 1, 'x-int64': true } as const;
export const Resources = object('ResourceLimits', {
  memory_bytes: positiveInt,
  cpu_quota: { ...positiveInt, description: 'microseconds per 100 ms period (50000 = half a core)' },
  cpu_shares: { ...positiveInt, description: 'relative weight, 1024 = default' },
  pids_limit: positiveInt,
  disk_bytes: { ...positiveInt, description: "bytes the sandbox's changes may take on disk" },
  tmp_bytes: { ...positiveInt, description: 'size of the private /tmp (RAM, counted in memory_bytes too)' },
});

export const CreateSandboxBody = object(
  'CreateSandboxRequest',
  {
    codebase_id: str,
    permissions: { type: 'array', items: PermissionRuleIn, description: 'exclusive with preset' },
    preset: { type: 'string', description: 'a preset name (default agent-safe when neither is given)' },
    runtime: enumIn(RUNTIME_TYPE),
    image: { type: 'string', description: 'container image (docker runtime only)' },
    resources: Resources,
    labels: stringMap,
    expires_in: duration,
    network: {
      type: 'boolean',
      description: 'true: mode open (any public destination); default false: only a loopback of its own',
    },
    network_policy: NetworkPolicyIn,
    secrets: {
      type: 'array',
      items: SecretIn,
      description: 'secrets the sandbox may use but never read (write-only: no route returns a value)',
    },
    env: { ...stringMap, description: 'environment of every command (never reported back)' },
    audit_allowed: { type: 'boolean', description: 'audit allowed accesses too (denials always are)' },
    start: { type: 'boolean', description: 'start it at once (default false: it stays PENDING)' },
  },
  ['codebase_id'],
);

export const Sandbox = outObject('Sandbox', {
  id: str,
  codebase_id: str,
  permissions: { type: 'array', items: PermissionRuleOut },
  status: { type: 'string', enum: Object.values(SANDBOX_STATUS.long) },
  status_reason: nullableStr,
  labels: stringMap,
  created_at: time,
  updated_at: time,
  started_at: nullableTime,
  stopped_at: nullableTime,
  expires_at: nullableTime,
  runtime: str,
  image: nullableStr,
  resources: Resources,
  network: { type: 'boolean', description: 'whether the sandbox reaches beyond its own loopback' },
  network_policy: NetworkPolicyOut,
  secrets: { type: 'array', items: SecretOut, description: "the sandbox's secrets, never their values" },
  audit_allowed: { type: 'boolean' },
  restart_count: { type: 'integer' },
  last_restart_at: nullableTime,
  last_restart_reason: nullableStr,
});

export const ListSandboxesQuery = object('ListSandboxesQuery', {
  codebase_id: str,
  status: enumIn(SANDBOX_STATUS),
  labels: {
    type: 'array',
    items: str,
    description: 'label filter `key:value` (comma-separated or repeated); every one must match',
  },
  ...pageQuery,
});

export const SandboxList = outObject('ListSandboxesResponse', {
  sandboxes: { type: 'array', items: Sandbox },
  next_page_token: { type: 'string', description: 'empty on the last page' },
});

export const ExecBody = object(
  'ExecRequest',
  {
    command: {
      type: ['string', 'array'],
      items: str,
      minItems: 1,
      description: 'a string runs through /bin/sh -c; an array is the argv itself',
    },
    stdin: str,
    env: stringMap,
    workdir: { type: 'string', description: 'default /workspace' },
    timeout: duration,
    output_encoding: encoding,
  },
  ['command'],
);

export const ExecResultSchema = outObject('ExecResult', {
  stdout: str,
  stderr: str,
  exit_code: { type: ['integer', 'null'], description: 'null when killed by a signal' },
  duration: { type: 'string', description: 'protobuf JSON duration, e.g. "0.012s"' },
  duration_ms: { type: 'number' },
  timed_out: { type: 'boolean' },
  signal: nullableStr,
  cancelled: { type: 'boolean' },
  oom_killed: { type: 'boolean' },
  encoding: { type: 'string', enum: ['utf8', 'base64'] },
});

export const ExecStreamChunk: Schema = {
  title: 'ExecStreamLine',
  description:
    'One line of the NDJSON stream: `{stream, data}` output chunks (data in output_encoding, default base64), then exactly one final line, either an ExecResult without stdout/stderr (`done: true`) or `{error: {code, message}}`.',
  type: 'object',
};

const Change = outObject('Change', {
  path: str,
  kind: { type: 'string', enum: ['added', 'modified', 'deleted'] },
  type: { type: 'string', enum: ['file', 'directory', 'symlink', 'other'] },
  size: { type: ['integer', 'null'], 'x-int64': true },
  mode: {
    type: ['integer', 'null'],
    description: 'permission bits a commit writes (added and modified files and directories)',
  },
  old_mode: { type: ['integer', 'null'], description: "the codebase entry's permission bits (modified)" },
  target: { type: ['string', 'null'], description: 'the link target a commit writes (symlinks)' },
});

export const ChangeList = outObject('ListChangesResponse', { changes: { type: 'array', items: Change } });

const pathsFilter = {
  type: 'array',
  items: str,
  description: 'only these codebase paths (default: every change)',
} as const;

export const DiffQuery = object('DiffQuery', { paths: pathsFilter });

export const DiffResult = outObject('DiffResponse', {
  diff: { type: 'string', description: 'unified diff of the text changes' },
  binary: { type: 'array', items: str, description: 'changed files whose content is not text' },
});

export const CommitBody = object('CommitRequest', {
  mode: {
    type: 'string',
    enum: [...COMMIT_MODE.accepted],
    description: 'default detect-conflicts: changes to files the codebase changed meanwhile are kept back',
  },
  paths: pathsFilter,
});

export const CommitResultSchema = outObject('CommitResponse', {
  applied: { type: 'array', items: Change },
  conflicts: {
    type: 'array',
    items: outObject('CommitConflict', { path: str, reason: str }),
  },
  skipped: {
    type: 'array',
    items: outObject('CommitSkipped', { path: str, reason: str }),
    description: 'device nodes, FIFOs and sockets: never written to the codebase (kept in the sandbox)',
  },
  changed: {
    type: 'array',
    items: outObject('CommitChanged', { path: str, reason: str }),
    description: 'entries written with a change, e.g. set-uid/set-gid bits removed',
  },
  interrupted: {
    type: 'string',
    description:
      'why the commit stopped before the end ("" when it ran to the end): the sandbox was stopped or destroyed meanwhile. `applied` then lists exactly what was written, each file complete; the rest stays in the sandbox (if it was not destroyed)',
  },
});

export const DiscardBody = object('DiscardRequest', { paths: pathsFilter });

export const LogsQuery = object('LogsQuery', {
  tail: { type: 'integer', minimum: 1, maximum: 100000, description: 'the last N lines (default 1000)' },
});

export const LogsResult = outObject('LogsResponse', {
  lines: { type: 'array', items: str, description: 'JSON log lines of the sandbox, oldest first' },
});

export const LogStreamLine: Schema = {
  title: 'LogStreamLine',
  description:
    'One line of the NDJSON stream: `{"line": "..."}` per log line (the worker\'s JSON line, as a string), oldest first; when the sandbox is destroyed or the server shuts down, a final `{"done": true, "reason": "..."}`.',
  type: 'object',
};

export const AuditQuery = object('AuditQuery', {
  decision: { type: 'string', enum: ['allow', 'deny'] },
  limit: {
    type: 'integer',
    minimum: 1,
    maximum: 100000,
    description: 'the most recent N events (default 1000)',
  },
});

export const AuditResult = outObject('AuditResponse', {
  events: {
    type: 'array',
    items: outObject('AuditEvent', {
      seq: { type: 'integer' },
      time: time,
      op: str,
      path: str,
      target: nullableStr,
      decision: { type: 'string', enum: ['allow', 'deny'] },
      permission: { type: 'string', enum: Object.values(PERMISSION.long) },
      errno: nullableStr,
      pid: { type: ['integer', 'null'] },
      similar: {
        type: 'integer',
        description:
          "how many denials of the same op, errno and permission within one second this record stands for (1: just this one); the fields are the first one's",
      },
    }),
  },
});

// --- Sessions ---------------------------------------------------------------------------------------

export const CreateSessionBody = object('CreateSessionRequest', {
  shell: { type: 'string', description: '/bin/sh (default) or /bin/bash' },
  env: stringMap,
  workdir: { type: 'string', description: 'initial working directory (default /workspace)' },
  idle_timeout: { ...duration, description: `${duration.description} Default 30 minutes.` },
});

export const SessionSchema = outObject('Session', {
  id: str,
  sandbox_id: str,
  status: { type: 'string', enum: Object.values(SESSION_STATUS.long) },
  shell: str,
  created_at: time,
  closed_at: nullableTime,
  closed_reason: nullableStr,
  last_active_at: time,
});

export const SessionList = outObject('ListSessionsResponse', {
  sessions: { type: 'array', items: SessionSchema },
});

export const SessionExecBody = object(
  'SessionExecRequest',
  { command: { type: 'string' }, stdin: str, timeout: duration, output_encoding: encoding },
  ['command'],
);

export const SessionExecResultSchema = outObject('SessionExecResult', {
  stdout: str,
  stderr: str,
  exit_code: { type: ['integer', 'null'], description: 'null when the command timed out' },
  duration: str,
  duration_ms: { type: 'number' },
  timed_out: { type: 'boolean' },
  truncated: { type: 'boolean' },
  session_closed: { type: 'boolean' },
  encoding: { type: 'string', enum: ['utf8', 'base64'] },
});

// --- Meta -------------------------------------------------------------------------------------------

export const Health = outObject('Health', { status: { type: 'string', enum: ['ok'] }, version: str });
