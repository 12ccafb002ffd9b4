// Starting a sandbox's parts (contract §6): directories and the shared bind, the worker and its mount
// under supervision, then the runtime. A failure tears down whatever had started (teardown.ts), records
// ERROR with the reason and throws.
import { performance } from 'node:perf_hooks';
import { toAgentFenseError } from '@agentfense/protocol';
import type { RuntimeInstance } from '@agentfense/protocol';
import type { WorkerHandle } from '@agentfense/fuse-worker';
import { PROXY_ENV, netnsPathOf } from '@agentfense/network';
import type { SandboxNetwork } from '@agentfense/network';
import type { NetworkOptions } from '@agentfense/network';
import type { CodebaseService } from '../codebases/service.js';
import type { SandboxRow } from '../store/sandboxes.js';
import { AuditWriter } from '@agentfense/audit-trail';
import type { SandboxHostUsers } from './host-user.js';
import { mountParams } from './mounts.js';
import { startPolicyPoint } from './network.js';
import { processStartTime } from './process-identity.js';
import { secretStart } from './secret-start.js';
import { redact } from './secrets.js';
import type { SecretVault } from './secrets.js';
import type { RuntimeRegistry } from './runtimes.js';
import { WorkerSupervisor, type SupervisionOptions } from '@agentfense/fuse-worker';
import { tearDown } from './teardown.js';
import type { TeardownDeps, TeardownParts } from './teardown.js';
import type { WorkerPool } from '@agentfense/fuse-worker';
import { createWorkerCgroup, workerMemoryBound } from '@agentfense/fuse-worker';
import type { WorkerMemoryOptions } from '@agentfense/fuse-worker';

/**
 * Awaits every promise, then throws the first rejection (if any): nothing is left running unobserved
 * when one part of a start fails.
 */
async function settleAll<T extends readonly unknown[]>(promises: {
  readonly [K in keyof T]: Promise<T[K]>;
}): Promise<T> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** What a running sandbox holds in this process. */
export interface Live {
  readonly supervisor: WorkerSupervisor;
  readonly instance: RuntimeInstance;
  /** The network policy point; absent for a sandbox without network (mode none). */
  readonly network?: SandboxNetwork | undefined;
  readonly audit: AuditWriter;
}

/** Whether a running sandbox's worker and runtime keep this process alive (an idle spare's need not). */
export function keepLiveAlive(live: Live, keep: boolean): void {
  live.supervisor.keepProcessAlive(keep);
  live.instance.keepProcessAlive?.(keep);
}

/** What tear-down stops of a running sandbox. */
export function partsOf(live: Live): TeardownParts {
  return { instance: live.instance, worker: live.supervisor, network: live.network, audit: live.audit };
}

export interface StartDeps extends TeardownDeps {
  readonly codebases: CodebaseService;
  readonly runtimes: RuntimeRegistry;
  readonly pool: WorkerPool;
  readonly supervision: SupervisionOptions | undefined;
  readonly network: NetworkOptions;
  /** The parts of each worker's memory bound (worker-cgroup.ts). */
  readonly workerMemory: WorkerMemoryOptions | undefined;
  readonly hostUsers: SandboxHostUsers;
  /** Secret values by sandbox (secrets.ts). */
  readonly secrets: SecretVault;
}

export interface StartHooks {
  /** A worker was replaced under the running sandbox. */
  readonly onRestart: (reason: string) => void;
  /** Supervision gave up on the sandbox. */
  readonly onFatal: (reason: string) => void;
}

/**
 * Starts the parts of a claimed sandbox and records it RUNNING. On failure everything started is undone,
 * the sandbox goes to ERROR with the reason (ownership released), and the error is thrown.
 */
export async function startSandbox(deps: StartDeps, row: SandboxRow, hooks: StartHooks): Promise<Live> {
  const { id } = row;
  // Values this process lacks (a control plane opened after the create) are read from their sources.
  const held = await deps.secrets.load(id, row.secrets);
  const secrets = held.usable;
  // Masking reads the values held at each use: one given later (setSecret) is masked from then on.
  const mask = <T>(events: T): T => redact(events, deps.secrets.get(id));
  const paths = deps.layout.sandbox(id);
  const log = deps.logger.child({ sandboxId: id });
  let supervisor: WorkerSupervisor | undefined;
  let instance: RuntimeInstance | undefined;
  let network: SandboxNetwork | undefined;
  const audit = new AuditWriter(paths.auditLog, (err) =>
    log.error({ err }, 'could not write the audit trail'),
  );
  // The worker is asked for first, so a spawn it has to wait for (the pool's refill, raised to full
  // priority now) overlaps everything before the mount. Never handed to a supervisor: stopped below.
  let handedOver = false;
  const t0 = performance.now();
  let tTaken = t0;
  const taking: Promise<WorkerHandle> = deps.pool.take().then((worker) => {
    tTaken = performance.now();
    return worker;
  });
  // Observed now: a failed spawn surfaces where the worker is used (the supervisor's start), not as an
  // unhandled rejection while the directories are being prepared.
  taking.catch(() => undefined);
  try {
    // Independent of each other: the runtime (created on first use), the codebase's directory and its
    // identity, and the sandbox's directories with the shared bind.
    const [runtime, lower] = await settleAll([
      deps.runtimes.get(row.runtime),
      deps.codebases.lowerForMount(row.codebase_id),
      deps.mounts.prepare(paths, { runtimeName: row.runtime, sharedBind: true }),
    ] as const);
    const { traits } = runtime;
    // Every worker of the sandbox joins it before it mounts; the tear-down's clearing of the mounts
    // removes it.
    const cgroup = createWorkerCgroup({
      sandboxId: id,
      boundBytes: workerMemoryBound(row.resources.memoryBytes, deps.workerMemory),
      logger: log,
    });
    // Before the mount: the worker reports the sandbox's own uid as the owner of what it sees.
    const user = await deps.hostUsers.forStart({ row, paths, runtime });
    const t1 = performance.now();
    let tWorker = t1;
    let tRuntime = t1;
    const frozenBytes = await deps.frozenBytes(id);
    const supervising = WorkerSupervisor.start({
      sandboxId: id,
      mount: mountParams(row, paths, { lower, traits, user, frozenBytes }),
      logFile: paths.workerLog,
      logger: log,
      supervision: deps.supervision,
      // The first worker is the one taken above; a restart takes another.
      spawn: () => {
        if (handedOver) return deps.pool.take();
        handedOver = true;
        return taking;
      },
      cgroup,
      // Masked as written: the trail on disk never holds a secret's value either (secrets.ts).
      onAudit: (events) => audit.append(mask(events)),
      onWorker: async (pid, mounted) => {
        await deps.store.update(id, { worker_pid: pid, worker_start: processStartTime(pid) ?? null });
        await deps.onLayers(id, mounted.frozen ?? []);
      },
      onRestart: hooks.onRestart,
      onFatal: hooks.onFatal,
    }).then((started) => {
      tWorker = performance.now();
      return started;
    });
    const policed = row.network.mode !== 'none';
    // A sandbox with secrets: its CA (in memory), the files and variables that make the sandbox trust it.
    const withSecrets = policed ? secretStart(id, held, row.secrets) : undefined;
    const ca = withSecrets?.ca;
    const startNetwork = async (create: boolean): Promise<void> => {
      network = await startPolicyPoint({
        row,
        stateDir: paths.state,
        create,
        network: deps.network,
        store: deps.store,
        audit,
        logger: log,
        ...(ca === undefined ? {} : { secrets: { secrets, ca } }),
        redact: mask,
      });
    };
    const startRuntime = async (): Promise<RuntimeInstance> => {
      // A runtime that joins a namespace gets it ready first; one that publishes its own gets it policed
      // right after (before start() returns here, so before any command).
      if (policed && traits.netns === 'joins') await startNetwork(true);
      const started = await runtime.start({
        sandboxId: id,
        workspaceHostPath: paths.workspace,
        stateDir: paths.state,
        ...(row.image === null ? {} : { image: row.image }),
        ...(policed ? { netns: netnsPathOf(paths.state) } : {}),
        resources: row.resources,
        ...(user === undefined ? {} : { user }),
        // The proxy variables first: a sandbox's own env may override them (the NAT polices either way).
        env: policed ? { ...PROXY_ENV, ...row.env, ...withSecrets?.env } : row.env,
        ...(withSecrets === undefined || withSecrets.files.length === 0 ? {} : { files: withSecrets.files }),
      });
      instance = started;
      if (policed && traits.netns === 'publishes') await startNetwork(false);
      tRuntime = performance.now();
      return started;
    };
    // A runtime that binds the workspace path only when each command starts (bwrap) starts while the
    // worker spawns and mounts; both are done before start() returns (so before any command). Others
    // (docker binds the path into its relay at start) wait for the mount.
    if (traits.startsBeforeMount) {
      const [worker, started] = await Promise.allSettled([supervising, startRuntime()]);
      if (worker.status === 'fulfilled') supervisor = worker.value;
      if (started.status === 'fulfilled') instance = started.value;
      if (worker.status === 'rejected') throw worker.reason;
      if (started.status === 'rejected') throw started.reason;
    } else {
      supervisor = await supervising;
      instance = await startRuntime();
    }
    if (supervisor === undefined || instance === undefined) throw new Error('unreachable');
    // A secret without its value here is named in the state reason (and the log), with the fix.
    if (held.reason !== null) log.warn({ reason: held.reason }, 'sandbox started without some secrets');
    await deps.store.update(id, {
      state: 'RUNNING',
      state_reason: held.reason,
      started_at: Date.now(),
      limits: { ...instance.limits, diskBytes: row.resources.diskBytes ?? null },
    });
    const t3 = performance.now();
    log.info(
      {
        worker: supervisor.pid,
        // mounts: the directories and the shared bind, while a worker is taken (take: from the start);
        // worker (its mount) and runtime overlap for bwrap, each measured from the end of mounts.
        ms: {
          mounts: t1 - t0,
          take: tTaken - t0,
          worker: tWorker - t1,
          runtime: tRuntime - t1,
          total: t3 - t0,
        },
      },
      'sandbox started',
    );
    return { supervisor, instance, network, audit };
  } catch (err) {
    // A worker taken for a start that failed before the supervisor got it: it mounted nothing.
    if (!handedOver) {
      handedOver = true;
      void taking.then(
        (worker) => worker.stop({ graceMs: 1000 }),
        () => undefined,
      );
    }
    const error = toAgentFenseError(err, `starting sandbox ${id}`);
    await tearDown(deps, {
      id,
      parts: { instance, worker: supervisor, network, audit },
      runtimeName: row.runtime,
      closeSessions: false,
      mountErrors: 'log',
      settle: () => ({ state: 'ERROR', state_reason: `start failed: ${error.message}` }),
    });
    log.error({ err: error }, 'sandbox start failed');
    throw error;
  }
}
