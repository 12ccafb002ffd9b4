// The one tear-down of a sandbox's running parts, shared by stop, a supervision failure (ERROR), a
// failed start and a temporary worker: sessions closed, runtime and worker stopped, mounts cleared, audit
// flushed, the record settled and ownership released — in that order, each step whatever the last did.
import type { Logger } from 'pino';
import type { RuntimeInstance } from '@agentfense/protocol';
import type { DataLayout } from '../paths.js';
import type { SandboxPatch, SandboxRow, SandboxStore } from '../store/sandboxes.js';
import type { AuditWriter } from '@agentfense/audit-trail';
import type { SandboxMounts } from './mounts.js';
import { RELEASED } from './ownership.js';

/** What tear-down needs from the manager. */
export interface TeardownDeps {
  readonly layout: DataLayout;
  readonly store: SandboxStore;
  readonly mounts: SandboxMounts;
  readonly logger: Logger;
  /** Closes the sandbox's sessions (before its runtime stops under them). */
  readonly onStopping: (id: string) => Promise<void>;
  /**
   * A worker mounted the sandbox's delta and reported the frozen layers it stands on (its checkpoints'
   * stack, which the delta records itself): the checkpoint records are settled from it.
   */
  readonly onLayers: (id: string, frozen: readonly string[]) => Promise<void>;
  /** The bytes of the frozen layers the sandbox made (its checkpoints'), charged to its disk quota. */
  readonly frozenBytes: (id: string) => Promise<number>;
}

/** The parts to stop; a failed start passes what it got to. */
export interface TeardownParts {
  readonly instance?: RuntimeInstance | undefined;
  readonly worker?: { stop(): Promise<unknown> } | undefined;
  /** The network policy point (stopped after the runtime: nothing of the sandbox can dial any more). */
  readonly network?: { stop(): Promise<unknown> } | undefined;
  readonly audit: AuditWriter;
}

export interface TeardownOptions {
  readonly id: string;
  readonly parts: TeardownParts;
  /** The runtime whose leftovers are cleared; undefined when unknown (the record is gone). */
  readonly runtimeName: string | undefined;
  /** Close the sandbox's sessions first (false where none can exist: a failed start, a temporary worker). */
  readonly closeSessions: boolean;
  /**
   * A failed unmount is thrown (`stop` reports it; the record is left as it was) or only logged (the
   * sandbox is on its way to ERROR or was not running).
   */
  readonly mountErrors: 'throw' | 'log';
  /** Columns to set from the current row along with releasing ownership; absent: only the release. */
  readonly settle?: ((current: SandboxRow) => SandboxPatch) | undefined;
}

/** Tears down a sandbox's running parts. Stop failures of the runtime and worker are logged, never thrown. */
export async function tearDown(deps: TeardownDeps, options: TeardownOptions): Promise<void> {
  const { id, parts } = options;
  const log = deps.logger.child({ sandboxId: id });
  // What the stops wait for (processes exiting, connections closing) keeps the process alive until they
  // are done, also for a sandbox that did not (an idle spare); a worker's own stop does the same.
  parts.instance?.keepProcessAlive?.(true);
  if (options.closeSessions) {
    await deps.onStopping(id).catch((err: unknown) => log.warn({ err }, 'closing sessions failed'));
  }
  await parts.instance?.stop().catch((err: unknown) => log.warn({ err }, 'runtime stop failed'));
  await parts.worker?.stop().catch((err: unknown) => log.warn({ err }, 'worker stop failed'));
  await parts.network?.stop().catch((err: unknown) => log.warn({ err }, 'network policy point stop failed'));
  try {
    await deps.mounts.clear(deps.layout.sandbox(id), options.runtimeName);
  } catch (err) {
    if (options.mountErrors === 'throw') {
      await parts.audit.flush();
      throw err;
    }
    log.warn({ err }, 'unmount failed');
  }
  await parts.audit.flush();
  const current = await deps.store.find(id);
  if (current === undefined) return;
  await deps.store.update(id, { ...options.settle?.(current), ...RELEASED });
}
