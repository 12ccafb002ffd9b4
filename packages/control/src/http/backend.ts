// What the HTTP server needs from the control plane, as one interface, and its implementation over a
// ControlPlane. Routes only ever talk to an HttpBackend, so this file is the only one that follows the
// control plane's API; it also pages the one listing the control plane does not page itself (codebases)
// and reads a sandbox's log.
import type {
  CheckpointInfo,
  CheckpointOptions,
  ForkOptions,
  RestoreOptions,
} from '../sandboxes/checkpoints.js';
import { validateSecrets } from '@agentfense/network';
import type { NetworkAuditEvent, NetworkPolicyInput, SecretInput } from '@agentfense/network';
import { availableParallelism } from 'node:os';
import type { Readable } from 'node:stream';
import { InvalidArgumentError } from '@agentfense/protocol';
import type { AuditEvent, ChangeEntry, CommitMode, CommitResult, ExecResult } from '@agentfense/protocol';
import type { CodebaseInfo, FileEntry } from '../codebases/types.js';
import type { ControlPlane } from '../control-plane.js';
import type { AuditQuery } from '@agentfense/audit-trail';
import { tailLog } from '../sandboxes/log-file.js';
import type {
  CreateSandboxOptions,
  ListSandboxesOptions,
  Page,
  SandboxExecOptions,
  SandboxInfo,
} from '../sandboxes/types.js';
import type { CreateSessionOptions, SessionExecOptions, SessionExecResult } from '@agentfense/sessions';
import type { SessionInfo } from '@agentfense/sessions';
import { checkUserLabels } from '../sandboxes/validate.js';
import { decodePageToken, encodePageToken, pageSize } from '../store/pagination.js';
import { apiReach } from './api-reach.js';
import { ConcurrencyLimit } from './limit.js';

type MaybePromise<T> = T | Promise<T>;

/** Codebase listing filters and pagination. */
export interface ListCodebasesOptions {
  readonly ownerId?: string;
  readonly pageSize?: number;
  readonly pageToken?: string;
}

/** Create options of a sandbox as the HTTP API takes them: the control plane's, secrets by value only
 * (an API caller never names a file or command to read). */
export type HttpCreateSandboxOptions = Omit<CreateSandboxOptions, 'secrets'> & {
  readonly secrets?: readonly SecretInput[];
};

/** The operations the HTTP API exposes, in the control plane's camelCase shapes. */
export interface HttpBackend {
  createCodebase(options: { name: string; ownerId?: string | null }): MaybePromise<CodebaseInfo>;
  getCodebase(id: string): MaybePromise<CodebaseInfo>;
  listCodebases(options: ListCodebasesOptions): MaybePromise<Page<CodebaseInfo>>;
  deleteCodebase(id: string): Promise<void>;
  /** Writes one file atomically; an aborted `signal` (the client went away) leaves the old file. */
  uploadFile(
    id: string,
    path: string,
    source: AsyncIterable<Uint8Array>,
    options?: { signal?: AbortSignal },
  ): Promise<FileEntry>;
  listFiles(id: string, options: { path?: string; recursive?: boolean }): Promise<FileEntry[]>;
  downloadFile(id: string, path: string): Promise<{ stream: Readable; size: number }>;

  createSandbox(options: HttpCreateSandboxOptions): Promise<SandboxInfo>;
  getSandbox(id: string): MaybePromise<SandboxInfo>;
  listSandboxes(options: ListSandboxesOptions): MaybePromise<Page<SandboxInfo>>;
  startSandbox(id: string): Promise<SandboxInfo>;
  stopSandbox(id: string): Promise<SandboxInfo>;
  destroySandbox(id: string): Promise<void>;
  exec(id: string, command: string | readonly string[], options: SandboxExecOptions): Promise<ExecResult>;
  changes(id: string): Promise<readonly ChangeEntry[]>;
  diff(
    id: string,
    options: { paths?: readonly string[] },
  ): Promise<{ diff: string; binary: readonly string[] }>;
  commit(id: string, options: { mode?: CommitMode; paths?: readonly string[] }): Promise<CommitResult>;
  discard(id: string, options: { paths?: readonly string[] }): Promise<void>;
  checkpoint(id: string, options: CheckpointOptions): Promise<CheckpointInfo>;
  listCheckpoints(id: string): Promise<CheckpointInfo[]>;
  restoreCheckpoint(
    id: string,
    checkpointId: string,
    options: RestoreOptions,
  ): Promise<{ kept?: CheckpointInfo }>;
  deleteCheckpoint(id: string, checkpointId: string): Promise<void>;
  forkSandbox(id: string, options: ForkOptions): Promise<SandboxInfo[]>;
  /** A file as the sandbox sees it, through its rules (`path` is a codebase path, `/src/a.ts`). */
  readFile(id: string, path: string): Promise<Buffer>;
  /** Writes a file into the sandbox's delta, through its rules. */
  writeFile(id: string, path: string, data: Uint8Array | string): Promise<void>;
  /** The sandbox's own log, last `tail` whole lines, oldest first. */
  logs(id: string, options: { tail: number }): Promise<string[]>;
  /** Where the sandbox's log is (NotFoundError for an unknown sandbox), for following it. */
  logFile(id: string): MaybePromise<string>;
  audit(id: string, query: AuditQuery): Promise<AuditEvent[]>;
  /** Replaces the network policy (validated); a running sandbox applies it at once. */
  setNetwork(id: string, policy: boolean | NetworkPolicyInput): Promise<SandboxInfo>;
  networkAudit(id: string, query: AuditQuery): Promise<NetworkAuditEvent[]>;
  /** Gives (or replaces) a declared secret's value: a value alone, never a source (docs/secrets.md). */
  setSecret(id: string, name: string, value: string): Promise<SandboxInfo>;

  createSession(sandboxId: string, options: CreateSessionOptions): Promise<SessionInfo>;
  getSession(id: string): MaybePromise<SessionInfo>;
  listSessions(sandboxId: string): MaybePromise<SessionInfo[]>;
  sessionExec(id: string, command: string, options: SessionExecOptions): Promise<SessionExecResult>;
  closeSession(id: string): Promise<void>;

  /** Closes every session, stops every sandbox this process runs and unmounts everything. */
  close(): Promise<void>;
}

export interface ControlPlaneBackendOptions {
  /**
   * Sandbox starts run at most this many at a time; the others queue. A start spawns a worker process and
   * mounts it, which is CPU-bound: fifty at once on two cores take so long that workers miss their
   * handshake deadline, while queued they all succeed sooner. Default: the number of CPUs (at least 2).
   */
  readonly maxConcurrentStarts?: number;
  /**
   * Also reach codebases a local process linked (and their sandboxes and sessions): only for a backend
   * that serves the local user itself (`agentfense mcp` on stdio), never for a network face.
   */
  readonly localCodebases?: boolean;
  /**
   * Whether a sandbox is owned by this process from its creation (default true: a server that dies
   * before the start leaves it to recovery). False for replicas sharing a database: a sandbox created
   * through one and not started yet can be started through any of them.
   */
  readonly ownCreated?: boolean;
}

/** Default of `maxConcurrentStarts`. */
export function defaultMaxConcurrentStarts(): number {
  return Math.max(2, availableParallelism());
}

/** An HttpBackend over a ControlPlane (which closes a sandbox's sessions before it stops). */
export function controlPlaneBackend(
  plane: ControlPlane,
  options: ControlPlaneBackendOptions = {},
): HttpBackend {
  const starts = new ConcurrencyLimit(options.maxConcurrentStarts ?? defaultMaxConcurrentStarts());
  // Every id a request names is checked first: a locally linked codebase, its sandboxes and their
  // sessions are "not found" here (api-reach.ts).
  const reach = options.localCodebases === true ? undefined : apiReach(plane);
  const ownCreated = options.ownCreated !== false;
  const placed = plane.placedSessions;
  // Each answer rejects (never throws) when refused: the records are read asynchronously.
  const sandbox = async <T>(id: string, act: () => T | Promise<T>): Promise<T> => {
    await reach?.sandbox(id);
    return act();
  };
  const session = async <T>(id: string, act: () => T | Promise<T>): Promise<T> => {
    await reach?.session(id);
    return act();
  };
  const codebase = async <T>(id: string, act: () => T | Promise<T>): Promise<T> => {
    await reach?.codebase(id);
    return act();
  };
  const [inSandbox, inSession, inCodebase] = [sandbox, session, codebase];
  return {
    createCodebase: (options) => plane.createCodebase(options),
    getCodebase: (id) => codebase(id, () => plane.getCodebase(id)),
    listCodebases: async (options) => {
      const all = await plane.listCodebases();
      const listed = await Promise.all(all.map(async (c) => (await reach?.listed(c)) ?? true));
      return pageCodebases(
        all.filter((_, i) => listed[i]),
        options,
      );
    },
    deleteCodebase: (id) => inCodebase(id, () => plane.deleteCodebase(id)),
    uploadFile: (id, path, source, options) =>
      inCodebase(id, () => plane.uploadFile(id, path, source, options)),
    listFiles: (id, options) => inCodebase(id, () => plane.listFiles(id, options)),
    downloadFile: (id, path) => inCodebase(id, () => plane.downloadFile(id, path)),

    // The control plane refuses an image for a runtime other than docker.
    // Owned by this server from creation: if it dies before the start, recovery settles the sandbox
    // (STOPPED) instead of leaving it PENDING; a clean shutdown hands it back PENDING.
    // Secrets are checked to be values alone here, whatever a face let through: a source (env, file,
    // command) is an unknown field, so no API caller makes this process read a file or run a command.
    createSandbox: (options) =>
      inCodebase(options.codebaseId, () =>
        plane.createSandbox(
          {
            ...options,
            ...(options.secrets === undefined ? {} : { secrets: validateSecrets(options.secrets) }),
          },
          { own: ownCreated },
        ),
      ),
    getSandbox: (id) => sandbox(id, () => plane.getSandbox(id)),
    // The run helper's idle spares are internal: the local CLI may list them by their reserved label
    // (records.ts), a remote caller may not (it could then exec in, stop or destroy a sandbox the next
    // `run` takes): a filter on that key is refused as a create with it is.
    listSandboxes: (options) =>
      plane.listSandboxes({
        ...options,
        ...(options.labels === undefined ? {} : { labels: checkUserLabels(options.labels) }),
        apiVisibleOnly: reach !== undefined,
      }),
    startSandbox: (id) => inSandbox(id, () => starts.run(() => plane.startSandbox(id))),
    stopSandbox: (id) => inSandbox(id, () => plane.stopSandbox(id)),
    destroySandbox: (id) => inSandbox(id, () => plane.destroySandbox(id)),
    exec: (id, command, options) =>
      inSandbox(id, () => plane.run(id, command, { ...options, encoding: 'buffer' })),
    changes: (id) => inSandbox(id, () => plane.changes(id)),
    diff: (id, options) => inSandbox(id, () => plane.diff(id, options)),
    commit: (id, options) => inSandbox(id, () => plane.commit(id, options)),
    discard: (id, options) => inSandbox(id, () => plane.discard(id, options)),
    checkpoint: (id, options) => inSandbox(id, () => plane.checkpoint(id, options)),
    listCheckpoints: (id) => inSandbox(id, () => plane.listCheckpoints(id)),
    restoreCheckpoint: (id, checkpointId, options) =>
      inSandbox(id, () => plane.restoreCheckpoint(id, checkpointId, options)),
    deleteCheckpoint: (id, checkpointId) => inSandbox(id, () => plane.deleteCheckpoint(id, checkpointId)),
    forkSandbox: (id, options) => inSandbox(id, () => plane.forkSandbox(id, options)),
    readFile: (id, path) => inSandbox(id, () => plane.readFile(id, path)),
    writeFile: (id, path, data) => inSandbox(id, () => plane.writeFile(id, path, data)),
    logs: (id, { tail }) =>
      inSandbox(id, async () => (await tailLog(plane.layout.sandbox(id).workerLog, tail)).lines),
    logFile: (id) => sandbox(id, () => plane.layout.sandbox(id).workerLog),
    audit: (id, query) => inSandbox(id, () => plane.audit(id, query)),
    setNetwork: (id, policy) => inSandbox(id, () => plane.setNetwork(id, policy)),
    networkAudit: (id, query) => inSandbox(id, () => plane.audit(id, { ...query, kind: 'network' })),
    // A value alone, whatever a face let through: no API caller names a variable, file or command here.
    setSecret: (id, name, value) => {
      if (typeof value !== 'string') throw new InvalidArgumentError(`secret ${name}: give { "value": "…" }`);
      return inSandbox(id, () => plane.setSecret(id, name, { value }));
    },

    // 404 for an unknown sandbox before "not running". Sandboxes placed on cluster nodes have their
    // sessions on their node agents (placement/sessions.ts); the others in this process.
    createSession: (sandboxId, options) =>
      inSandbox(sandboxId, async () =>
        placed === undefined
          ? (await plane.createSession(sandboxId, options)).info()
          : placed.create(sandboxId, options),
      ),
    getSession: (id) => session(id, () => placed?.get(id) ?? plane.getSession(id).info()),
    listSessions: (sandboxId) =>
      sandbox(
        sandboxId,
        () => placed?.list(sandboxId) ?? plane.listSessions({ sandboxId }).map((s) => s.info()),
      ),
    sessionExec: (id, command, options) =>
      inSession(
        id,
        () =>
          placed?.run(id, command, options) ??
          plane.getSession(id).run(command, { ...options, encoding: 'buffer' }),
      ),
    closeSession: (id) => inSession(id, () => placed?.close(id) ?? plane.closeSession(id)),

    close: () => plane.close(),
  };
}

/** Owner filter and keyset pagination over a full, creation-ordered codebase listing. */
export function pageCodebases(
  all: readonly CodebaseInfo[],
  options: ListCodebasesOptions,
): Page<CodebaseInfo> {
  const limit = pageSize(options.pageSize);
  const after = options.pageToken === undefined ? undefined : decodePageToken(options.pageToken);
  const key = (c: CodebaseInfo): [number, string] => [Date.parse(c.createdAt), c.id];
  const matching = all
    .filter((c) => options.ownerId === undefined || c.ownerId === options.ownerId)
    .filter((c) => {
      if (after === undefined) return true;
      const [createdAt, id] = key(c);
      return createdAt > after.createdAt || (createdAt === after.createdAt && id > after.id);
    })
    .sort((a, b) => {
      const [ta, ia] = key(a);
      const [tb, ib] = key(b);
      return ta - tb || (ia < ib ? -1 : ia > ib ? 1 : 0);
    });
  const items = matching.slice(0, limit);
  const last = items.at(-1);
  return {
    items,
    nextPageToken:
      matching.length > limit && last !== undefined
        ? encodePageToken({ createdAt: Date.parse(last.createdAt), id: last.id })
        : null,
  };
}
