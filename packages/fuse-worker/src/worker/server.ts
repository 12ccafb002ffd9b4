// The worker's side of the protocol: one mounted view per process. `mount` opens the delta, compiles the
// rules and mounts; every other method works on that one mount. Teardown is idempotent and is reached from
// `unmount`, from the control plane hanging up, and from SIGTERM/SIGINT.
import { mkdir } from 'node:fs/promises';
import { LowLevelFuse } from '@agentfense/fuse-native';
import {
  InvalidArgumentError,
  WrongStateError,
  compileRules,
  normalizePath,
  serveWorkerApi,
} from '@agentfense/protocol';
import type {
  MountParams,
  RpcPeer,
  WorkerHandlers,
  WorkerResult,
  WorkerServer,
  WorkerStats,
  FuseConnStats,
  WarmupStats,
} from '@agentfense/protocol';
import type { CommitOptions } from '../delta/types.js';
import { AuditLog } from '../audit.js';
import { compactStack } from '../delta/compact.js';
import { Delta } from '../delta/delta.js';
import { createHandlers } from '../fs/binding.js';
import { EntryWarmup } from '../fs/entry-warmup.js';
import { OpStats } from '../fs/op-stats.js';
import { PolicyFs } from '../fs/policy-fs.js';
import { abortFuseConnection, fuseMountsAt } from '../mounts.js';
import {
  connStats,
  disabledFeatures,
  featureOptions,
  listingRefresh,
  listingReplay,
  storeAhead,
  entryWarmup,
  directWrites,
  freshEntries,
  readaheadBytes,
} from '../mount-options.js';
import { widenReadahead } from '../readahead-window.js';
import {
  arraySource,
  changeBytes,
  conflictBytes,
  diffSource,
  onceDone,
  PartStore,
  sequenceSource,
} from './parts.js';
import { IdleTrim, type Collect } from './idle-trim.js';
import { enableNativePaths } from './native-paths.js';
import type { WorkerLogger as Logger } from './log.js';
import { cpuMs, readPss } from './process-usage.js';

/** Default seconds the kernel caches entries and attributes (rule changes and discards invalidate). */
export const DEFAULT_CACHE_TTL_SECONDS = 60;
/** How long a lazy unmount may wait for a busy mount before its connection is aborted. */
export const UNMOUNT_GRACE_MS = 1000;
/** How often the worker tells the control plane it is alive. */
export const HEALTH_INTERVAL_MS = 1000;
/**
 * How long an unmount waits for the control plane to fetch the rest of a commit answer given in parts
 * (it asks for each part as soon as it has the previous one): a commit a stop or destroy cut short must
 * still say exactly what it wrote. The control plane gives an unmount 30 s while it fetches such an answer.
 */
export const COMMIT_ANSWER_GRACE_MS = 10_000;

/** The control plane itself, as a caller in audit records of library readFile/writeFile. */
const CONTROL_CALLER = { pid: 0, uid: 0, gid: 0 };

interface Mounted {
  readonly fuse: LowLevelFuse;
  readonly fs: PolicyFs;
  readonly delta: Delta;
  readonly mountpoint: string;
  /** What the FUSE connection negotiated (features in use). */
  readonly conn: FuseConnStats;
}

export interface WorkerServerOptions {
  readonly peer: RpcPeer;
  readonly logger: Logger;
  /**
   * The mount named this worker's sandbox and log file (a worker spawned ahead of time learns them
   * then): switches the log over and returns the logger to use from now on.
   */
  readonly onAssigned?: (assigned: { logFile?: string; name?: string }) => Logger;
  /** A memory-reducing garbage collection, run when the mounted worker goes quiet (idle-trim.ts). */
  readonly collect?: Collect;
}

/** One worker's state machine: idle -> mounted -> closed. */
export class WorkerService {
  readonly #peer: RpcPeer;
  readonly #onAssigned: WorkerServerOptions['onAssigned'];
  #logger: Logger;
  readonly #stats = new OpStats();
  readonly #started = Date.now();
  readonly #server: WorkerServer;
  readonly #audit: AuditLog;
  #mounted: Mounted | undefined;
  #mounting = false;
  #rulesVersion = 0;
  #teardown: Promise<void> | undefined;
  #health: NodeJS.Timeout | undefined;
  readonly #collect: Collect | undefined;
  /** Control requests handled, which with FUSE ops tells the idle trim whether the worker worked. */
  #requests = 0;
  /** The last entry warm-up that finished (fs/entry-warmup.ts), for `stats`. */
  #warmup: WarmupStats | undefined;
  /** Answers too large for one frame, waiting for `more`. */
  readonly #parts = new PartStore();
  /** Commits in progress, so a teardown can end them cleanly between two files. */
  readonly #commits = new Map<AbortController, Promise<unknown>>();
  /** Commit answers whose later parts the control plane has not fetched yet (resolved when it has). */
  readonly #undelivered = new Set<Promise<void>>();

  constructor(options: WorkerServerOptions) {
    this.#peer = options.peer;
    this.#logger = options.logger;
    this.#onAssigned = options.onAssigned;
    this.#collect = options.collect;
    this.#audit = new AuditLog({ emit: (events) => this.#server.emit('audit', events) });
    this.#server = serveWorkerApi(this.#peer, this.#counted(this.#handlers()));
  }

  /** Unmounts (if mounted) and releases everything; safe to call many times. */
  close(reason: string): Promise<void> {
    this.#teardown ??= this.#close(reason);
    return this.#teardown;
  }

  async #close(reason: string): Promise<void> {
    this.#logger.info({ reason }, 'shutting down');
    if (this.#health !== undefined) clearInterval(this.#health);
    this.#audit.flush();
    for (const [stop, running] of this.#commits) {
      stop.abort(new Error(`the worker is shutting down (${reason})`));
      await running.catch(() => undefined);
    }
    if (this.#undelivered.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(this.#undelivered),
        new Promise((done) => (timer = setTimeout(done, COMMIT_ANSWER_GRACE_MS))),
      ]);
      clearTimeout(timer);
    }
    this.#parts.clear();
    const mounted = this.#mounted;
    this.#mounted = undefined;
    if (mounted !== undefined) {
      // The warm-up holds descriptors inside the mount: it ends first, so they do not keep it busy.
      await mounted.fs.entryWarmup?.stop();
      // Lazy: a process still inside the mount (a shell cd'ed there) must not keep us from exiting. The
      // kernel keeps a detached mount's connection while it is busy, so abort it if the unmount lags.
      const minor = (await fuseMountsAt(mounted.mountpoint)).at(-1)?.minor;
      const unmounted = mounted.fuse.unmount({ lazy: true }).catch((err: unknown) => {
        this.#logger.error({ err }, 'unmount failed');
      });
      const lagging = await Promise.race([
        unmounted.then(() => false),
        new Promise<boolean>((done) => setTimeout(() => done(true), UNMOUNT_GRACE_MS)),
      ]);
      if (lagging && minor !== undefined) {
        this.#logger.warn({ minor }, 'mount still busy after the lazy unmount: aborting the connection');
        await abortFuseConnection(minor);
      }
      await unmounted;
      await mounted.fs.close();
      await mounted.delta.close();
      this.#logger.info({ mountpoint: mounted.mountpoint, ops: this.#stats.total() }, 'unmounted');
    }
    this.#server.dispose();
  }

  #need(): Mounted {
    if (this.#mounted === undefined) throw new WrongStateError('the worker has not mounted anything yet');
    return this.#mounted;
  }

  async #mount(params: MountParams): Promise<WorkerResult<'mount'>> {
    if (this.#mounted !== undefined || this.#mounting || this.#teardown !== undefined) {
      throw new WrongStateError('this worker already mounted (one mount per worker process)');
    }
    this.#mounting = true;
    try {
      if (this.#onAssigned !== undefined && (params.logFile !== undefined || params.name !== undefined)) {
        this.#logger = this.#onAssigned({
          ...(params.logFile === undefined ? {} : { logFile: params.logFile }),
          ...(params.name === undefined ? {} : { name: params.name }),
        });
      }
      const rules = compileRules(params.rules);
      const disabled = disabledFeatures(process.env);
      const ttl = params.cacheTtlSeconds ?? DEFAULT_CACHE_TTL_SECONDS;
      if (!(ttl >= 0 && ttl <= 86_400)) {
        throw new InvalidArgumentError(`cacheTtlSeconds must be between 0 and 86400 (got ${ttl})`);
      }
      this.#audit.allowed = params.auditAllowed ?? false;
      // The control plane's own path (trusted); the delta layer opens it without following symlinks.
      await mkdir(params.deltaDir, { recursive: true, mode: 0o700 });
      const ownerUid = params.ownerUid ?? process.getuid?.() ?? 0;
      const ownerGid = params.ownerGid ?? process.getgid?.() ?? 0;
      const delta = await Delta.open({
        lowerDir: params.lowerDir,
        lowerIdentity: params.lowerIdentity,
        deltaDir: params.deltaDir,
        logger: this.#logger,
        ...(params.diskQuotaBytes === undefined ? {} : { diskQuotaBytes: params.diskQuotaBytes }),
        ...(params.frozenBytes === undefined ? {} : { frozenBytes: params.frozenBytes }),
        // Copy-ups keep the owner the sandbox saw on the codebase entry (see README: owners).
        owner: { uid: ownerUid, gid: ownerGid },
      });
      const fs = new PolicyFs({
        delta,
        rules,
        audit: this.#audit,
        cacheTtlSeconds: ttl,
        uid: ownerUid,
        gid: ownerGid,
        statfsPath: params.deltaDir,
        stats: this.#stats,
      });
      fs.mountpoint = params.mountpoint;
      // No fd of ours may write into a layer once it is frozen (delta.layerEpoch).
      delta.onLayerChange = () => {
        fs.revokeNativeLookups();
        fs.handles.closeUnpinned();
      };
      const handlers = createHandlers({
        fs,
        stats: this.#stats,
        attrTimeout: ttl,
        onInternalError: (op, err) => this.#logger.error({ op, err }, 'filesystem op failed unexpectedly'),
        callerUid: params.callerUid,
      });
      const fuse = new LowLevelFuse(params.mountpoint, handlers, {
        fsname: 'agentfense',
        subtype: 'agentfense',
        defaultPermissions: true,
        allowOther: params.allowOther ?? false,
        extraOptions: ['nosuid', 'nodev'],
        ...featureOptions(disabled),
        onError: (err) => this.#logger.error({ err }, 'FUSE handler error'),
      });
      fs.invalidator = {
        inode: async (ino) => {
          await fuse.notifyInvalInode(ino, 0, 0);
        },
        entry: async (parent, name) => {
          await fuse.notifyInvalEntry(parent, name);
        },
        beforeContents: () => fuse.bumpStoreEpoch(),
      };
      let conn: FuseConnStats;
      try {
        const info = await fuse.mount();
        fs.listingsCarryAttributes = info.features.readdirplus;
        fs.refreshListingsOnRead = listingRefresh(info, disabled);
        fs.replayListings = listingReplay(info, disabled);
        fs.readAheadFiles = (dirFd, maxBytes, nodes, strings) =>
          fuse.storeAhead(dirFd, maxBytes, nodes, strings);
        fs.storeAhead = storeAhead(info, disabled);
        fs.directWrites = directWrites(disabled);
        enableNativePaths({ fs, fuse, callerUid: params.callerUid, disabled });
        fs.freshEntries = freshEntries(info, disabled);
        if (entryWarmup(info, disabled) && params.warmupEntries !== 0) {
          fs.entryWarmup = new EntryWarmup({
            mountpoint: params.mountpoint,
            ...(params.warmupEntries === undefined ? {} : { budget: params.warmupEntries }),
            allowed: () => !fs.auditsAllowed,
            generation: () => fs.generation,
            activity: () => fs.answeredInBinding,
            onDone: (summary) => {
              this.#warmup = summary;
              this.#stats.record('entry-warmup', summary.ms * 1000, summary.end === 'stopped');
              this.#logger.info({ warmup: summary }, 'entry warm-up done');
            },
            onError: (err) => this.#logger.warn({ err }, 'entry warm-up failed (the mount works without it)'),
          });
        }
        const window = readaheadBytes(info, disabled);
        const widened = window === null ? null : await widenReadahead(params.mountpoint, window);
        if (widened instanceof Error) {
          // Not fatal: the kernel's default window (128 KiB READs) stays; `stats` shows readahead off.
          this.#logger.warn({ err: widened }, 'could not widen the read-ahead window');
        }
        conn = connStats(info, disabled, typeof widened === 'number');
        this.#logger.info({ mountpoint: params.mountpoint, fuse: conn, ttl }, 'mounted');
      } catch (err) {
        await delta.close();
        throw err;
      }
      this.#mounted = { fuse, fs, delta, mountpoint: params.mountpoint, conn };
      this.#rulesVersion = 1;
      const trim =
        this.#collect === undefined
          ? undefined
          : new IdleTrim(this.#collect, () => this.#stats.total() + this.#requests);
      this.#health = setInterval(() => {
        this.#server.emit('health', { time: Date.now(), ops: this.#stats.total() });
        trim?.tick();
      }, HEALTH_INTERVAL_MS);
      return { mountpoint: params.mountpoint, pid: process.pid, frozen: delta.frozenLayers };
    } finally {
      this.#mounting = false;
    }
  }

  async #commit(mounted: Mounted, options: CommitOptions): Promise<WorkerResult<'commit'>> {
    mounted.fs.revokeNativeLookups();
    const { applied, conflicts, skipped, changed, interrupted } = await mounted.delta.commit(options);
    // Committed files moved from the delta to the codebase: host handles we hold may point at them.
    await mounted.fs.invalidateAll();
    this.#logger.info(
      {
        applied: applied.length,
        conflicts: conflicts.length,
        skipped: skipped.length,
        changed: changed.length,
        interrupted,
      },
      'commit',
    );
    let delivered = (): void => undefined;
    const whole = new Promise<void>((resolve) => (delivered = resolve));
    const { part, next } = await this.#parts.first(
      onceDone(
        sequenceSource([
          arraySource('applied', applied, changeBytes),
          arraySource('conflicts', conflicts, conflictBytes),
        ]),
        () => delivered(),
      ),
    );
    if (next !== undefined) {
      this.#undelivered.add(whole);
      void whole.then(() => this.#undelivered.delete(whole));
    }
    return {
      applied: part.applied ?? [],
      conflicts: part.conflicts ?? [],
      // Notes on special files and stripped set-id bits: a few entries, sent whole in the first part.
      skipped,
      changed,
      ...(interrupted === undefined ? {} : { interrupted }),
      ...(next === undefined ? {} : { next }),
    };
  }

  async #stats_(): Promise<WorkerStats> {
    this.#mounted?.fs.countNativeOps();
    return {
      cpuMs: cpuMs(), // first: the rest of this answer (smaps_rollup) is not counted
      uptimeMs: Date.now() - this.#started,
      ops: this.#stats.summary(),
      rssBytes: process.memoryUsage.rss(),
      pssBytes: await readPss(),
      openHandles: this.#mounted?.fs.handles.size ?? 0,
      ...(this.#mounted === undefined ? {} : { fuse: this.#mounted.conn }),
      ...(this.#warmup === undefined ? {} : { warmup: this.#warmup }),
    };
  }

  /** The same handlers, each call counted in #requests. */
  #counted(handlers: WorkerHandlers): WorkerHandlers {
    const counted: Record<string, unknown> = {};
    for (const [method, handler] of Object.entries(handlers) as [string, (...args: unknown[]) => unknown][]) {
      counted[method] = (...args: unknown[]): unknown => {
        this.#requests++;
        return handler(...args);
      };
    }
    return counted as unknown as WorkerHandlers;
  }

  #handlers(): WorkerHandlers {
    return {
      mount: (params) => this.#mount(params),
      unmount: async () => {
        await this.close('asked to unmount');
        return {};
      },
      setRules: async ({ rules }) => {
        const compiled = compileRules(rules);
        await this.#need().fs.setRules(compiled);
        this.#logger.info({ rules: rules.length }, 'rules replaced');
        return { version: ++this.#rulesVersion };
      },
      setAudit: async ({ allowed }) => {
        const before = this.#audit.allowed;
        this.#audit.allowed = allowed;
        // From this answer on every read must reach us to be recorded: pages the kernel holds (a READ's, or
        // stored ahead, fs/store-ahead.ts) would be read without that.
        if (allowed && !before && this.#mounted !== undefined) await this.#mounted.fs.invalidateAll();
        return {};
      },
      // A barrier for audit events too: what was recorded before this request reaches the control plane
      // before its answer (same ordered connection), so an audit query right after a command sees it.
      stats: () => {
        this.#audit.flush();
        return this.#stats_();
      },
      changes: async () => {
        const changes = await this.#need().delta.changes();
        const { part, next } = await this.#parts.first(arraySource('changes', changes, changeBytes));
        return { changes: part.changes ?? [], ...(next === undefined ? {} : { next }) };
      },
      diff: async ({ paths }) => {
        const items = await this.#need().delta.diffItems(pathFilter(paths));
        const { part, next } = await this.#parts.first(diffSource(items));
        return { diff: part.diff ?? '', binary: part.binary ?? [], ...(next === undefined ? {} : { next }) };
      },
      commit: ({ mode, paths }) => {
        const mounted = this.#need();
        // Unmounting (stop, destroy) ends a running commit between two files; it still answers, with
        // what it applied and why it stopped, before the worker goes.
        const stop = new AbortController();
        const answer = this.#commit(mounted, { mode, ...pathFilter(paths), signal: stop.signal });
        this.#commits.set(stop, answer);
        return answer.finally(() => this.#commits.delete(stop));
      },
      more: ({ cursor }) => this.#parts.more(cursor),
      discard: async ({ paths }) => {
        const mounted = this.#need();
        // The host files the discard removes free their room only once no handle of ours holds them
        // (invalidateAll closes them too, but after): on a full filesystem the discard needs that room.
        mounted.fs.handles.closeUnpinned();
        mounted.fs.revokeNativeLookups();
        // Everything, on checkpoints: the codebase again, with no frozen layer under it (the checkpoints
        // stay restorable: their layers are not this delta's to remove).
        if (paths === undefined && mounted.delta.frozenLayers.length > 0) {
          await mounted.delta.restore({ frozen: [] });
        } else {
          await mounted.delta.discard(pathFilter(paths));
        }
        await mounted.fs.invalidateAll();
        this.#logger.info({ paths: paths ?? ['/'] }, 'discard');
        return {};
      },
      checkpoint: async ({ layerDir }) => {
        const mounted = this.#need();
        // Our fds of writable-layer files are closed as it begins (delta.onLayerChange, set at mount): the
        // next write opens the path again, copying the file up into the new writable layer.
        const { bytes } = await mounted.delta.checkpoint({ layerDir });
        this.#logger.info({ layerDir, depth: mounted.delta.frozenLayers.length, bytes }, 'checkpoint');
        return { frozen: mounted.delta.frozenLayers, ...(bytes === null ? {} : { bytes }) };
      },
      setFrozenBytes: ({ bytes }) => {
        const quota = this.#need().delta.quota;
        if (quota !== null) quota.frozen = bytes;
        return {};
      },
      restore: async ({ frozen }) => {
        const mounted = this.#need();
        mounted.fs.handles.closeUnpinned();
        await mounted.delta.restore({ frozen });
        // What the sandbox sees changed as after a discard: the kernel forgets what it cached.
        await mounted.fs.invalidateAll();
        this.#logger.info({ depth: frozen.length }, 'restore');
        return {};
      },
      compactLayers: async ({ from, to, switchStack }) => {
        const mounted = this.#need();
        const { switched, bytes } = await compactStack(mounted.delta, { from, to, switchStack });
        // The same files at the same paths: the kernel's caches are dropped as after a rule change.
        if (switched) await mounted.fs.invalidateAll();
        this.#logger.info({ from, to, switched, depth: mounted.delta.frozenLayers.length }, 'compact');
        return { frozen: mounted.delta.frozenLayers, switched, bytes };
      },
      readFile: async ({ path }) => ({
        data: await this.#need().fs.readPath(clientPath(path), CONTROL_CALLER),
      }),
      writeFile: async ({ path, data }) => {
        await this.#need().fs.writePath(clientPath(path), data, CONTROL_CALLER);
        return {};
      },
    };
  }
}

/** A codebase path from the control plane: absolute, normalised, no `..` escaping the root. */
function clientPath(path: string): string {
  if (path.includes('\0')) throw new InvalidArgumentError('path must not contain NUL bytes');
  if (path.split('/').includes('..')) throw new InvalidArgumentError(`path must not contain '..': ${path}`);
  return normalizePath(path.startsWith('/') ? path : `/${path}`);
}

function pathFilter(paths: readonly string[] | undefined): { paths?: string[] } {
  return paths === undefined ? {} : { paths: paths.map(clientPath) };
}
