// Why a sandbox's worker exited, said to supervision (its restart record and, after repeated failures,
// the sandbox's ERROR reason) and to the caller whose request it was serving: a worker the kernel killed
// for going over its memory bound (worker-cgroup.ts) is named as such, not as a closed connection.
import { setTimeout as delay } from 'node:timers/promises';
import { ProtocolError, WorkerExitedError } from '@agentfense/protocol';
import type { WorkerHandle } from '../handle.js';
import type { WorkerCgroup } from '../worker-cgroup.js';

const MiB = 1024 * 1024;

/** How long a call whose worker connection closed waits for the worker's exit, to say why it failed. */
const EXIT_AFTER_CLOSE_MS = 2000;

/**
 * Why a worker exited, for supervision's restart record and, after repeated failures, the sandbox's ERROR
 * reason: a SIGKILL while its cgroup's OOM counter grew past `before` was the kernel enforcing the bound.
 */
function workerExitReason(options: {
  readonly pid: number;
  readonly exit: { readonly code: number | null; readonly signal: string | null };
  readonly cgroup?: WorkerCgroup | null | undefined;
  /** The cgroup's OOM counter when this worker started serving. */
  readonly before?: number | null | undefined;
}): string {
  const { pid, exit, cgroup, before } = options;
  const after = cgroup?.oomKills() ?? null;
  if (exit.signal === 'SIGKILL' && cgroup != null && before != null && after !== null && after > before) {
    const mib = Math.round(cgroup.boundBytes / MiB);
    return (
      `worker ${pid} went over its memory bound of ${mib} MiB and the kernel killed it ` +
      `(by default 256 MiB + half the sandbox's memory limit: give the sandbox more memory to raise it)`
    );
  }
  return `worker ${pid} exited (code ${exit.code}, signal ${exit.signal})`;
}

/**
 * Why `worker` exits, once it has: read the cgroup's OOM counter now (when it starts serving), and compare
 * at its exit.
 */
export function exitReasonOf(worker: WorkerHandle, cgroup: WorkerCgroup | null): Promise<string> {
  const before = cgroup?.oomKills() ?? null;
  return worker.exited.then((exit) => workerExitReason({ pid: worker.pid, exit, cgroup, before }));
}

/**
 * A call's answer; when the call failed because its worker died under it (its connection closes a moment
 * before the process is reaped), a WorkerExitedError saying why the worker exited instead of "connection
 * closed".
 */
export async function explainedCall<T>(options: {
  readonly sandboxId: string;
  readonly method: string;
  readonly call: Promise<T>;
  /** exitReasonOf the worker serving the call. */
  readonly exit: Promise<string> | undefined;
}): Promise<T> {
  try {
    return await options.call;
  } catch (err) {
    if (!(err instanceof ProtocolError || err instanceof WorkerExitedError)) throw err;
    const reason = await Promise.race([options.exit, delay(EXIT_AFTER_CLOSE_MS).then(() => undefined)]);
    if (reason === undefined) throw err;
    throw new WorkerExitedError(`sandbox ${options.sandboxId}: ${options.method} failed: ${reason}`, {
      cause: err,
    });
  }
}
