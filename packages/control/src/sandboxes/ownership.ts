// Ownership of sandboxes across processes sharing one data directory: each running sandbox records its
// owner (pid + kernel start time + which ControlPlane object); a process only ever drives sandboxes it
// owns, and one whose owner has died is recovered (worker killed, mounts cleared, marked STOPPED).
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { WrongStateError } from '@agentfense/protocol';
import type { DataLayout } from '../paths.js';
import { RemoteSandboxError } from '../placement/errors.js';
import { ORCHESTRATED } from '../placement/options.js';
import type { SandboxRow, SandboxStore } from '../store/sandboxes.js';
import type { SandboxMounts } from './mounts.js';
import { isSameProcess, selfIdentity, waitGone } from './process-identity.js';

/** How long a claim waits for a dead owner's SIGKILLed worker to be gone (it dies in milliseconds). */
const KILLED_WORKER_WAIT_MS = 5000;

export interface OwnershipOptions {
  readonly layout: DataLayout;
  readonly store: SandboxStore;
  readonly mounts: SandboxMounts;
  readonly logger: Logger;
}

/** The owner columns that say "nobody runs this sandbox". */
export const RELEASED = {
  owner_pid: null,
  owner_start: null,
  owner_instance: null,
  worker_pid: null,
  worker_start: null,
} as const;

/** Claims, releases and recognises ownership for one control-plane object. */
export class Ownership {
  readonly #layout: DataLayout;
  readonly #store: SandboxStore;
  readonly #mounts: SandboxMounts;
  readonly #logger: Logger;
  readonly #self = { ...selfIdentity(), instance: randomUUID() };

  constructor(options: OwnershipOptions) {
    this.#layout = options.layout;
    this.#store = options.store;
    this.#mounts = options.mounts;
    this.#logger = options.logger;
  }

  /** The owner columns naming this object. */
  get columns(): { owner_pid: number; owner_start: string; owner_instance: string } {
    return { owner_pid: this.#self.pid, owner_start: this.#self.start, owner_instance: this.#self.instance };
  }

  /** Owned by this object. */
  isMine(row: SandboxRow): boolean {
    return (
      row.owner_pid === this.#self.pid &&
      row.owner_start === this.#self.start &&
      row.owner_instance === this.#self.instance
    );
  }

  /** Owned by another live process (which alone may drive it). */
  ownedElsewhere(row: SandboxRow): boolean {
    return row.owner_pid !== null && !this.isMine(row) && isSameProcess(row.owner_pid, row.owner_start);
  }

  /** WrongStateError naming the live process that runs the sandbox. */
  runningElsewhere(row: SandboxRow): WrongStateError {
    return new WrongStateError(`sandbox ${row.id} is running in control-plane process ${row.owner_pid}`, {
      details: { id: row.id, ownerPid: row.owner_pid },
    });
  }

  /** The error of a call that needs the sandbox running in this object, which it is not. */
  notRunningHere(row: SandboxRow): WrongStateError | RemoteSandboxError {
    const { id, state } = row;
    // Placed on a cluster node: the calls the node agents serve never come here (placement/).
    if (row.owner_instance === ORCHESTRATED) {
      return new RemoteSandboxError(
        'not-routed',
        `sandbox ${id} runs on a cluster node: this call is not routed to node agents`,
        { details: { id } },
      );
    }
    if (this.ownedElsewhere(row)) return this.runningElsewhere(row);
    if (state === 'RUNNING') {
      return new WrongStateError(
        `sandbox ${id} was RUNNING in control-plane process ${row.owner_pid ?? 'unknown'}, which is gone; start it again`,
        { details: { id, state } },
      );
    }
    return new WrongStateError(
      `sandbox ${id} is ${state}, not RUNNING${row.state_reason ? ` (${row.state_reason})` : ''}`,
      { details: { id, state } },
    );
  }

  /**
   * Makes this object the sandbox's owner, atomically across processes. A dead owner's leftovers are
   * cleaned up first; a live other owner is a WrongStateError.
   */
  async claim(id: string): Promise<SandboxRow> {
    const before = await this.#store.updateLocked(id, (row) => {
      if (this.ownedElsewhere(row)) {
        throw new WrongStateError(`sandbox ${id} is in use by control-plane process ${row.owner_pid}`, {
          details: { id, ownerPid: row.owner_pid },
        });
      }
      return this.columns;
    });
    if (before.owner_pid !== null && !this.isMine(before)) await this.#cleanupStale(before);
    return this.#store.get(id);
  }

  /** Gives up ownership (the sandbox is not running here any more). */
  release(id: string): Promise<void> {
    return this.#store.update(id, RELEASED);
  }

  /**
   * Clears what a dead owner left: its worker, the FUSE mount, the shared bind; a RUNNING sandbox becomes
   * STOPPED. Called by claim() only, so the caller already holds the claim (ownership stays with it).
   */
  async #cleanupStale(row: SandboxRow): Promise<void> {
    if (
      row.worker_pid !== null &&
      row.worker_start !== null &&
      isSameProcess(row.worker_pid, row.worker_start)
    ) {
      try {
        process.kill(row.worker_pid, 'SIGKILL');
      } catch (err) {
        this.#logger.debug({ err, pid: row.worker_pid }, 'leftover worker already gone');
      }
      // Until its last thread is gone it may still finish a write into the codebase (a commit's), which a
      // commit finished by the new owner must not race.
      if (!(await waitGone(row.worker_pid, row.worker_start, KILLED_WORKER_WAIT_MS)))
        this.#logger.warn({ pid: row.worker_pid }, 'a killed leftover worker is still running');
    }
    await this.#mounts.clear(this.#layout.sandbox(row.id), row.runtime);
    const ownerPid = row.owner_pid ?? 'unknown';
    // A temporary worker on a stopped sandbox also records an owner: only RUNNING and PENDING (a start
    // or a one-shot run under way) change state; STOPPED can be started again, so nothing stays PENDING.
    await this.#store.update(row.id, {
      ...(row.state === 'RUNNING' || row.state === 'PENDING'
        ? {
            state: 'STOPPED',
            state_reason: `recovered: control-plane process ${ownerPid} exited while the sandbox was ${row.state}`,
            stopped_at: Date.now(),
          }
        : {}),
      worker_pid: null,
      worker_start: null,
    });
    this.#logger.warn(
      { sandboxId: row.id, ownerPid: row.owner_pid, state: row.state },
      'recovered a sandbox',
    );
  }
}
