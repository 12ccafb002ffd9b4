// Worker calls on a sandbox's delta whether or not it runs: on the live worker of a running sandbox, or
// on a temporary worker mounted just for the call (so changes, diff, commit and discard work after a stop).
import { WrongStateError } from '@agentfense/protocol';
import type { WorkerMethod, WorkerParams, WorkerResult } from '@agentfense/protocol';
import type { CodebaseService } from '../codebases/service.js';
import type { SandboxRow } from '../store/sandboxes.js';
import { AuditWriter } from '@agentfense/audit-trail';
import type { KeyedLock } from './keyed-lock.js';
import type { Ownership } from './ownership.js';
import type { Live } from './start.js';
import { mountParams } from './mounts.js';
import { processStartTime } from './process-identity.js';
import { tearDown } from './teardown.js';
import { redact } from './secrets.js';
import type { SecretVault } from './secrets.js';
import type { TeardownDeps } from './teardown.js';
import {
  createWorkerCgroup,
  exitReasonOf,
  explainedCall,
  requestWholeOn,
  spawnAndMount,
  workerMemoryBound,
} from '@agentfense/fuse-worker';
import type { WorkerMemoryOptions } from '@agentfense/fuse-worker';

/** What a worker call needs from the manager. */
export interface WorkerCallDeps extends TeardownDeps {
  readonly codebases: CodebaseService;
  readonly workerMemory: WorkerMemoryOptions | undefined;
  readonly live: ReadonlyMap<string, Live>;
  readonly locks: KeyedLock;
  readonly owner: Ownership;
  /** Throws when the control plane is closed. */
  readonly assertOpen: () => void;
  /** Secret values by sandbox: masked in every answer (a diff, a file read), secrets.ts. */
  readonly secrets: SecretVault;
}

/**
 * Calls a worker method: on the live worker of a running sandbox (all parts of an answer from the one
 * worker, even once a stop began: a commit cut short still says exactly what it wrote), or, for a
 * sandbox that is not running, on a temporary worker mounted just for this call (so changes, diff,
 * commit and discard work after a stop). The temporary worker holds the sandbox's ownership meanwhile.
 */
export async function onWorker<M extends WorkerMethod>(
  d: WorkerCallDeps,
  id: string,
  method: M,
  params: WorkerParams<M>,
): Promise<WorkerResult<M>> {
  return redact(await unmaskedOnWorker(d, id, method, params), d.secrets.get(id));
}

async function unmaskedOnWorker<M extends WorkerMethod>(
  d: WorkerCallDeps,
  id: string,
  method: M,
  params: WorkerParams<M>,
): Promise<WorkerResult<M>> {
  const live = d.live.get(id);
  if (live !== undefined) return live.supervisor.requestWhole(method, params);
  return d.locks.run(id, async () => {
    const again = d.live.get(id);
    if (again !== undefined) return again.supervisor.requestWhole(method, params);
    d.assertOpen();
    const row = await d.owner.claim(id);
    if (row.state === 'RUNNING') {
      await d.owner.release(id);
      throw new WrongStateError(`sandbox ${id} is RUNNING but not in this process`);
    }
    return onTemporaryWorker(d, row, method, params);
  });
}

/**
 * Calls `method` on a temporary worker mounted on the claimed, not running sandbox `row`, then tears it
 * down (worker stopped, mounts cleared, audit flushed, ownership released) whatever happened.
 */
export async function onTemporaryWorker<M extends WorkerMethod>(
  deps: TeardownDeps & {
    readonly codebases: CodebaseService;
    readonly workerMemory: WorkerMemoryOptions | undefined;
  },
  row: SandboxRow,
  method: M,
  params: WorkerParams<M>,
): Promise<WorkerResult<M>> {
  const { id } = row;
  const paths = deps.layout.sandbox(id);
  const audit = new AuditWriter(paths.auditLog, (err) =>
    deps.logger.error({ err, sandboxId: id }, 'could not write the audit trail'),
  );
  let worker: Awaited<ReturnType<typeof spawnAndMount>> | undefined;
  try {
    // No runtime will see this mount: no shared bind, and the mount's owner is the worker's own.
    await deps.mounts.prepare(paths, { runtimeName: row.runtime, sharedBind: false });
    const lower = await deps.codebases.lowerForMount(row.codebase_id);
    // Bounded as a running sandbox's worker is; removed with the mounts by the tear-down below.
    const cgroup = createWorkerCgroup({
      sandboxId: id,
      boundBytes: workerMemoryBound(row.resources.memoryBytes, deps.workerMemory),
      logger: deps.logger,
    });
    worker = await spawnAndMount({
      sandboxId: id,
      mount: mountParams(row, paths, { lower, traits: null, frozenBytes: await deps.frozenBytes(id) }),
      logFile: paths.workerLog,
      cgroup,
      onWorker: async (pid, mounted) => {
        await deps.store.update(id, { worker_pid: pid, worker_start: processStartTime(pid) ?? null });
        await deps.onLayers(id, mounted.frozen ?? []);
      },
    });
    // Attached once mounted, as the supervisor does: the call below is the first access through the mount.
    worker.client.onEvent('audit', (events) => audit.append(events));
    const exit = exitReasonOf(worker, await cgroup);
    return await explainedCall({
      sandboxId: id,
      method,
      call: requestWholeOn(worker.client, method, params),
      exit,
    });
  } finally {
    await tearDown(deps, {
      id,
      parts: { worker, audit },
      runtimeName: row.runtime,
      closeSessions: false,
      mountErrors: 'log',
    });
  }
}
