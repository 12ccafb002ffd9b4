// The typed contract between the control plane and a worker: one table of methods (control -> worker)
// and one of events (worker -> control), each with a guard for every params/result/payload type. The
// worker checks params before its handler runs; the control plane checks results and events on arrival.

import type { ChangeEntry, CommitConflict, CommitMode, CommitResult, AuditEvent } from '../delta-types.js';
import { InvalidArgumentError, ProtocolError, toAgentFenseError } from '../errors.js';
import type { PermissionRule } from '../permissions/types.js';
import { PERMISSIONS } from '../permissions/types.js';
import type { Guard } from './guards.js';
import * as g from './guards.js';
import type { ResultPart } from './parts.js';
import type { HandlerContext, RequestOptions, RpcPeer } from './rpc.js';
import type { Subscription } from './transport.js';
import type { OpStats, WorkerStats } from './worker-stats.js';

/** Params or result with no fields. */
export type Empty = Record<string, never>;

/** A directory's (device, inode), as decimal strings: 64-bit values cross msgpack and JSON intact. */
export interface DirIdentity {
  readonly dev: string;
  readonly ino: string;
}

/** What a worker mounts: the codebase (lower), this sandbox's delta, where, and with which rules. */
export interface MountParams {
  /**
   * The codebase directory (read-only lower layer): an absolute path the worker opens without following
   * a symlink in any component.
   */
  readonly lowerDir: string;
  /** The identity `lowerDir` had when it was linked: a different directory there is refused. */
  readonly lowerIdentity?: DirIdentity;
  /** This sandbox's delta directory (created if missing). */
  readonly deltaDir: string;
  /** An existing empty directory to mount on. */
  readonly mountpoint: string;
  readonly rules: readonly PermissionRule[];
  /** Let other uids use the mount (Docker with a non-root user inside). Default false. */
  readonly allowOther?: boolean;
  /**
   * Host uid/gid reported as the owner of every entry: the sandbox user's host identity, so the owner
   * mode bits (where the rules live) apply to it. Default: the worker's own (bwrap maps its user to it).
   */
  readonly ownerUid?: number;
  readonly ownerGid?: number;
  /**
   * With `allowOther`, the one uid besides root (0) whose requests the worker serves: the sandbox's own
   * (a uid no other sandbox has). Any other caller gets EACCES, a second layer behind the closed
   * directories that lead to the mount (a request the kernel answers from its caches never reaches the
   * worker). Absent: every caller the kernel lets in.
   */
  readonly callerUid?: number;
  /** Seconds the kernel may cache entries and attributes (rule changes invalidate explicitly). */
  readonly cacheTtlSeconds?: number;
  /** Audit allowed accesses too (denials always are). */
  readonly auditAllowed?: boolean;
  /**
   * Bytes this sandbox's delta may hold (file sizes, at least 4 KiB per entry); writes, creates, copies,
   * truncates and fallocate beyond it fail with ENOSPC and `df` shows it as the disk's size. Absent: no quota.
   */
  readonly diskQuotaBytes?: number;
  /**
   * Bytes of the frozen layers (checkpoints) this sandbox made, counted against `diskQuotaBytes` with its
   * writable layer. Default 0; `setFrozenBytes` changes it while mounted.
   */
  readonly frozenBytes?: number;
  /**
   * After the sandbox's first access the worker lists the tree through its own mount, breadth first, so the
   * kernel holds every visible name before it is asked for (no LOOKUP round trip per first stat/open): at
   * most this many entries (a directory is listed whole; the budget is checked between directories).
   * Default 16384; 0 switches the warm-up off.
   */
  readonly warmupEntries?: number;
  /**
   * The worker's log file from now on (it is reopened there), and the name shown in its process title and
   * log lines: a worker spawned ahead of time, before its sandbox was known, takes them on at mount.
   */
  readonly logFile?: string;
  readonly name?: string;
}

/** Methods the control plane calls on a worker, with their params and result types. */
export interface WorkerMethods {
  /** Mounts the filesystem; resolves once the kernel mount is live. Called once, first. */
  mount: {
    params: MountParams;
    result: {
      readonly mountpoint: string;
      readonly pid: number;
      /** The frozen layers the delta sits on, oldest first (its checkpoints' stack). */
      readonly frozen?: readonly string[];
    };
  };
  /** Unmounts and lets the worker exit cleanly (its delta stays on disk). */
  unmount: { params: Empty; result: Empty };
  /** Replaces the permission rules; `version` increases with every accepted set. */
  setRules: { params: { readonly rules: readonly PermissionRule[] }; result: { readonly version: number } };
  /** Whether allowed accesses are audited too (denials always are). */
  setAudit: { params: { readonly allowed: boolean }; result: Empty };
  stats: { params: Empty; result: WorkerStats };
  /**
   * The sandbox's change set against the codebase. This and `diff`/`commit` answer in parts when the
   * answer would not fit one frame: `next` is then the cursor to pass to `more` (collectParts does it).
   */
  changes: { params: Empty; result: { readonly changes: readonly ChangeEntry[]; readonly next?: string } };
  /** Unified diff of text changes; binary files are listed instead of diffed. */
  diff: {
    params: { readonly paths?: readonly string[] };
    result: { readonly diff: string; readonly binary: readonly string[]; readonly next?: string };
  };
  /**
   * Writes changes (all, or those under `paths`) to the codebase; first the changes of an unfinished
   * commit (one a crash or stop cut short), whatever `paths` says: `paths: []` finishes only those.
   */
  commit: {
    params: { readonly mode: CommitMode; readonly paths?: readonly string[] };
    result: CommitResult & { readonly next?: string };
  };
  /** The next part of a `changes`/`diff`/`commit` answer (its fields are appended to the first part's). */
  more: { params: { readonly cursor: string }; result: ResultPart };
  /** Drops changes (all, or those under `paths`). */
  discard: { params: { readonly paths?: readonly string[] }; result: Empty };
  /**
   * Freezes the delta's writable layer as the frozen layer `layerDir` (which must not exist) and goes on
   * with an empty writable layer on top: what the sandbox sees does not change. Renames, no copying.
   */
  checkpoint: {
    params: { readonly layerDir: string };
    /**
     * `bytes`: what the frozen layer costs in the quota's measure (the worker counts it frozen at once);
     * absent without a quota (not counted: measure the layer).
     */
    result: { readonly frozen: readonly string[]; readonly bytes?: number };
  };
  /** The total of the frozen layers this sandbox made, charged to its disk quota from now on. */
  setFrozenBytes: { params: { readonly bytes: number }; result: Empty };
  /** Drops the writable layer's content and puts the delta on `frozen` (oldest first): a rollback. */
  restore: { params: { readonly frozen: readonly string[] }; result: Empty };
  /**
   * Folds the adjacent frozen layers `from` (lower, upper) into the frozen layer `to`, built from them if
   * it does not exist yet, and (unless `switchStack` is false) puts the delta on it in their place if its
   * stack holds them: what the sandbox sees does not change. `bytes`: what `to` costs in the quota's
   * measure.
   */
  compactLayers: {
    params: { readonly from: readonly string[]; readonly to: string; readonly switchStack?: boolean };
    result: { readonly frozen: readonly string[]; readonly switched: boolean; readonly bytes: number };
  };
  /** Reads a file as the sandbox sees it, through the permission rules. */
  readFile: { params: { readonly path: string }; result: { readonly data: Uint8Array } };
  /** Writes a file into the sandbox's delta, through the permission rules. */
  writeFile: { params: { readonly path: string; readonly data: Uint8Array }; result: Empty };
}

/** A worker method name. */
export type WorkerMethod = keyof WorkerMethods;
/** The params type of worker method M. */
export type WorkerParams<M extends WorkerMethod> = WorkerMethods[M]['params'];
/** The result type of worker method M. */
export type WorkerResult<M extends WorkerMethod> = WorkerMethods[M]['result'];

/** Log levels a worker forwards (pino's names). */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

/** A log line forwarded from the worker: level and message plus free-form plain-data fields. */
export interface WorkerLogEvent {
  readonly level: (typeof LOG_LEVELS)[number];
  readonly msg: string;
  readonly [field: string]: unknown;
}

/** Periodic liveness report. */
export interface WorkerHealthEvent {
  /** Worker clock, milliseconds since the epoch. */
  readonly time: number;
  /** Filesystem operations served so far; a count that stops moving while commands run means a stall. */
  readonly ops: number;
}

/** Events a worker sends to the control plane, with their payload types. */
export interface WorkerEvents {
  /** A batch of access decisions, oldest first. */
  audit: readonly AuditEvent[];
  log: WorkerLogEvent;
  health: WorkerHealthEvent;
}

/** A worker event name. */
export type WorkerEvent = keyof WorkerEvents;

// --- Guards ---------------------------------------------------------------------------------------

const empty: Guard<Empty> = (value, path) => {
  g.object(value, path);
  return {};
};
const paths = g.optional(g.arrayOf(g.string));
const next = g.optional(g.string);

/** Only the surface is checked here; the worker's permission engine validates rules in depth. */
const permissionRule: Guard<PermissionRule> = (value, path) => {
  const rule = g.object(value, path);
  g.string(rule.pattern, `${path}.pattern`);
  g.string(rule.permission, `${path}.permission`);
  return rule as unknown as PermissionRule;
};

const changeEntry: Guard<ChangeEntry> = g.shape({
  path: g.string,
  kind: g.oneOf(['added', 'modified', 'deleted']),
  type: g.oneOf(['file', 'directory', 'symlink', 'other']),
  size: g.nullable(g.count),
  mode: g.optional(g.count),
  oldMode: g.optional(g.count),
  target: g.optional(g.string),
});

const commitConflict: Guard<CommitConflict> = g.shape({ path: g.string, reason: g.string });

const opStats: Guard<OpStats> = g.shape({
  count: g.count,
  errors: g.count,
  p50Us: g.number,
  p99Us: g.number,
});

const auditEvent: Guard<AuditEvent> = g.shape({
  seq: g.count,
  time: g.number,
  op: g.string,
  path: g.string,
  target: g.optional(g.string),
  decision: g.oneOf(['allow', 'deny']),
  permission: g.oneOf(PERMISSIONS),
  errno: g.optional(g.string),
  pid: g.optional(g.count),
});

const logEvent: Guard<WorkerLogEvent> = (value, path) => {
  const event = g.object(value, path);
  g.oneOf(LOG_LEVELS)(event.level, `${path}.level`);
  g.string(event.msg, `${path}.msg`);
  return event as WorkerLogEvent;
};

/** Guards of every worker method: params (checked by the worker), result (checked by the control plane). */
export const WORKER_METHOD_GUARDS: {
  readonly [M in WorkerMethod]: {
    readonly params: Guard<WorkerParams<M>>;
    readonly result: Guard<WorkerResult<M>>;
  };
} = {
  mount: {
    params: g.shape({
      lowerDir: g.string,
      lowerIdentity: g.optional(g.shape({ dev: g.string, ino: g.string })),
      deltaDir: g.string,
      mountpoint: g.string,
      rules: g.arrayOf(permissionRule),
      allowOther: g.optional(g.boolean),
      ownerUid: g.optional(g.count),
      ownerGid: g.optional(g.count),
      callerUid: g.optional(g.count),
      cacheTtlSeconds: g.optional(g.number),
      auditAllowed: g.optional(g.boolean),
      diskQuotaBytes: g.optional(g.count),
      frozenBytes: g.optional(g.count),
      warmupEntries: g.optional(g.count),
      logFile: g.optional(g.string),
      name: g.optional(g.string),
    }),
    result: g.shape({ mountpoint: g.string, pid: g.count, frozen: g.optional(g.arrayOf(g.string)) }),
  },
  unmount: { params: empty, result: empty },
  setRules: { params: g.shape({ rules: g.arrayOf(permissionRule) }), result: g.shape({ version: g.count }) },
  setAudit: { params: g.shape({ allowed: g.boolean }), result: empty },
  stats: {
    params: empty,
    result: g.shape({
      uptimeMs: g.number,
      ops: g.recordOf(opStats),
      rssBytes: g.count,
      pssBytes: g.optional(g.nullable(g.count)),
      openHandles: g.count,
      cpuMs: g.optional(g.number),
      fuse: g.optional(
        g.shape({
          libfuse: g.string,
          kernelProtocol: g.string,
          maxWrite: g.count,
          features: g.recordOf(g.boolean),
          disabled: g.arrayOf(g.string),
        }),
      ),
      warmup: g.optional(
        g.shape({
          entries: g.count,
          directories: g.count,
          refused: g.count,
          ms: g.number,
          end: g.oneOf(['complete', 'budget', 'stopped']),
        }),
      ),
    }),
  },
  changes: { params: empty, result: g.shape({ changes: g.arrayOf(changeEntry), next }) },
  diff: {
    params: g.shape({ paths }),
    result: g.shape({ diff: g.string, binary: g.arrayOf(g.string), next }),
  },
  commit: {
    params: g.shape({ mode: g.oneOf(['detect-conflicts', 'last-writer-wins']), paths }),
    result: g.shape({
      applied: g.arrayOf(changeEntry),
      conflicts: g.arrayOf(commitConflict),
      skipped: g.optional(g.arrayOf(commitConflict)),
      changed: g.optional(g.arrayOf(commitConflict)),
      interrupted: g.optional(g.string),
      next,
    }),
  },
  more: {
    params: g.shape({ cursor: g.string }),
    result: g.shape({
      changes: g.optional(g.arrayOf(changeEntry)),
      diff: g.optional(g.string),
      binary: g.optional(g.arrayOf(g.string)),
      applied: g.optional(g.arrayOf(changeEntry)),
      conflicts: g.optional(g.arrayOf(commitConflict)),
      next,
    }),
  },
  discard: { params: g.shape({ paths }), result: empty },
  checkpoint: {
    params: g.shape({ layerDir: g.string }),
    result: g.shape({ frozen: g.arrayOf(g.string), bytes: g.optional(g.count) }),
  },
  setFrozenBytes: { params: g.shape({ bytes: g.count }), result: empty },
  restore: { params: g.shape({ frozen: g.arrayOf(g.string) }), result: empty },
  compactLayers: {
    params: g.shape({ from: g.arrayOf(g.string), to: g.string, switchStack: g.optional(g.boolean) }),
    result: g.shape({ frozen: g.arrayOf(g.string), switched: g.boolean, bytes: g.count }),
  },
  readFile: { params: g.shape({ path: g.string }), result: g.shape({ data: g.bytes }) },
  writeFile: { params: g.shape({ path: g.string, data: g.bytes }), result: empty },
};

/** Guards of every worker event payload (checked by the control plane). */
export const WORKER_EVENT_GUARDS: { readonly [E in WorkerEvent]: Guard<WorkerEvents[E]> } = {
  audit: g.arrayOf(auditEvent),
  log: logEvent,
  health: g.shape({ time: g.number, ops: g.count }),
};

// --- Control side ---------------------------------------------------------------------------------

/** The control plane's typed view of a worker connection. */
export interface WorkerClient {
  /** Calls a worker method; params are checked before sending, the result on arrival (ProtocolError). */
  request<M extends WorkerMethod>(
    method: M,
    params: WorkerParams<M>,
    options?: RequestOptions,
  ): Promise<WorkerResult<M>>;
  /**
   * Listens to one worker event. A payload that fails its guard closes the connection with a ProtocolError:
   * a worker that sends malformed audit data cannot be trusted with the rest.
   */
  onEvent<E extends WorkerEvent>(name: E, cb: (payload: WorkerEvents[E]) => void): Subscription;
}

/** Wraps an RpcPeer (control side) in the typed, validating WorkerClient. */
export function createWorkerClient(peer: RpcPeer): WorkerClient {
  return {
    async request(method, params, options) {
      const guards = WORKER_METHOD_GUARDS[method];
      guards.params(params, `${method} params`);
      const result = await peer.request(method, params, options);
      try {
        return guards.result(result, `${method} result`);
      } catch (err) {
        throw asProtocolError(err, 'worker broke the protocol:');
      }
    },
    onEvent(name, cb) {
      return peer.onEvent((eventName, payload) => {
        if (eventName !== name) return;
        let parsed;
        try {
          parsed = WORKER_EVENT_GUARDS[name](payload, `${name} event`);
        } catch (err) {
          peer.close(asProtocolError(err, 'worker broke the protocol:'));
          return;
        }
        cb(parsed);
      });
    },
  };
}

// --- Worker side ----------------------------------------------------------------------------------

/** The worker's implementation of every method; params arrive already checked. */
export type WorkerHandlers = {
  readonly [M in WorkerMethod]: (
    params: WorkerParams<M>,
    context: HandlerContext,
  ) => WorkerResult<M> | Promise<WorkerResult<M>>;
};

/** The worker's typed view of its connection. */
export interface WorkerServer {
  /** Sends an event to the control plane (payload checked first); false when the connection is closed. */
  emit<E extends WorkerEvent>(name: E, payload: WorkerEvents[E]): boolean;
  /** Unregisters every handler. */
  dispose(): void;
}

/** Registers `handlers` on an RpcPeer (worker side); invalid params are answered with AF_INVALID_ARGUMENT. */
export function serveWorkerApi(peer: RpcPeer, handlers: WorkerHandlers): WorkerServer {
  const subscriptions = (Object.keys(WORKER_METHOD_GUARDS) as WorkerMethod[]).map((method) =>
    peer.handle(method, (params, context) => {
      // One generic call site: TypeScript cannot correlate the guard and handler of the same M here.
      const parse = WORKER_METHOD_GUARDS[method].params as Guard<unknown>;
      const handler = handlers[method] as (params: unknown, context: HandlerContext) => unknown;
      return handler(parse(params, `${method} params`), context);
    }),
  );
  return {
    emit(name, payload) {
      // A guard failure here is a worker bug: throw to the emitting code rather than have the peer hang up.
      WORKER_EVENT_GUARDS[name](payload, `${name} event`);
      return peer.emit(name, payload);
    },
    dispose() {
      for (const sub of subscriptions) sub.dispose();
    },
  };
}

/** Guard failures on data from the worker mean the worker broke the contract, not that we asked badly. */
function asProtocolError(err: unknown, prefix: string): Error {
  if (err instanceof InvalidArgumentError)
    return new ProtocolError(`${prefix} ${err.message}`, { cause: err });
  return toAgentFenseError(err, 'checking data from the worker');
}
