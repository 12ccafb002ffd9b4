// A started sandbox kept ready for the next request with the same parameters: the run helper's for the
// next identical `run` (docs/decisions.md "The run helper keeps a spare sandbox for the next identical run"),
// the library's for the next identical `Sandbox.fromLocal` ("The library's front door shares one control
// plane per data directory"). Whoever calls over and over asks for the same directory, rules and limits each
// time, so after one such request one sandbox is linked, created and started with exactly its options, and
// the next request whose options are identical (and whose directory still resolves to the same place) takes
// it instead of starting its own. Anything else destroys it in the background and starts fresh. Nothing of
// the request is guessed: only the same create options are ever taken. An idle spare carries a reserved
// label (SPARE_LABEL) that keeps it out of listings, and does not keep the process alive; taking it removes
// the label, so the sandbox is listed and labelled as any other.
import { realpath, stat } from 'node:fs/promises';
import { removeTree } from '@agentfense/fuse-worker';
import type { ControlPlane } from '../control-plane.js';
import type { CreateSandboxOptions } from './types.js';

/** What a request would create: the directory and the sandbox options (all but the codebase id). */
export interface SpareSpec {
  readonly dir: string;
  readonly options: Omit<CreateSandboxOptions, 'codebaseId'>;
}

export interface TakenSandbox {
  readonly codebaseId: string;
  readonly sandboxId: string;
}

interface Spare {
  readonly key: string;
  /** The sandbox once started; undefined when preparing it failed. */
  readonly ready: Promise<(TakenSandbox & { hostPath: string; identity: string }) | undefined>;
}

/** Sorted-key JSON: the same options in any property order give the same key. */
export function spareKey(spec: SpareSpec): string {
  const sort = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(sort)
      : value !== null && typeof value === 'object'
        ? Object.fromEntries(
            Object.keys(value)
              .sort()
              .map((k) => [k, sort((value as Record<string, unknown>)[k])]),
          )
        : value;
  return JSON.stringify(sort(spec));
}

/** The directory's device and inode (following symlinks, as realpath does); undefined when it is gone. */
async function identityOf(path: string): Promise<string | undefined> {
  const st = await stat(path, { bigint: true }).catch(() => undefined);
  return st === undefined ? undefined : `${st.dev}:${st.ino}`;
}

/** At most one spare sandbox of a control plane. */
export class SpareSandbox {
  readonly #plane: ControlPlane;
  #spare: Spare | undefined;
  readonly #discarding = new Set<Promise<void>>();
  #closed = false;
  #abandoning: Promise<void> | undefined;

  constructor(plane: ControlPlane) {
    this.#plane = plane;
  }

  /** The spare, if it was made for exactly `spec` and is running; else undefined (and it is discarded). */
  async take(spec: SpareSpec): Promise<TakenSandbox | undefined> {
    const spare = this.#spare;
    this.#spare = undefined;
    if (spare === undefined) return undefined;
    if (spare.key !== spareKey(spec)) {
      this.#discard(spare);
      return undefined;
    }
    const [ready, hostPath, identity] = await Promise.all([
      spare.ready,
      realpath(spec.dir).catch(() => undefined),
      identityOf(spec.dir),
    ]);
    if (ready === undefined) return undefined;
    const running = await this.#plane.getSandbox(ready.sandboxId).then(
      (info) => info.state === 'RUNNING',
      () => false,
    );
    // Claimed only once it is known to be usable: a spare discarded here keeps its label to the end.
    const same = ready.hostPath === hostPath && identity !== undefined && ready.identity === identity;
    if (!same || !running || !(await this.#plane.claimSpareSandbox(ready.sandboxId))) {
      this.#discard(spare);
      return undefined;
    }
    this.#plane.keepProcessAlive(ready.sandboxId, true);
    return { codebaseId: ready.codebaseId, sandboxId: ready.sandboxId };
  }

  /** Starts a spare for `spec` in the background unless one is there or this is closing. */
  prepare(spec: SpareSpec): void {
    if (this.#closed || this.#spare !== undefined) return;
    const plane = this.#plane;
    const ready = (async () => {
      // After the answer that called this has gone out.
      await new Promise((resolve) => setImmediate(resolve));
      const codebase = await plane.linkCodebase({ path: spec.dir });
      const hostPath = codebase.path;
      // Taken before the worker opens the directory: a directory put in its place at any later moment
      // (removed and made again, a rename over it) has another identity at take(), and the spare, whose
      // worker may hold the old one, is not taken.
      const identity = await identityOf(hostPath);
      if (identity === undefined) throw new Error(`${hostPath} is gone`);
      try {
        const sandbox = await plane.createSandbox(
          { ...spec.options, codebaseId: codebase.id },
          { own: true, spare: true },
        );
        try {
          await plane.startSandbox(sandbox.id);
          // Idle, it does not keep the process alive: its owner closes it before the process exits.
          plane.keepProcessAlive(sandbox.id, false);
        } catch (err) {
          await plane.destroySandbox(sandbox.id).catch(() => undefined);
          throw err;
        }
        return { codebaseId: codebase.id, sandboxId: sandbox.id, hostPath, identity };
      } catch (err) {
        await plane.deleteCodebase(codebase.id).catch(() => undefined);
        throw err;
      }
    })().catch((err: unknown) => {
      plane.logger.warn({ err }, 'no spare sandbox');
      return undefined;
    });
    this.#spare = { key: spareKey(spec), ready };
  }

  #discard(spare: Spare): void {
    const done = spare.ready.then(async (ready) => {
      if (ready === undefined) return;
      await this.#plane.destroySandbox(ready.sandboxId);
      await this.#plane.deleteCodebase(ready.codebaseId);
    });
    const tracked = done
      .catch((err: unknown) => this.#plane.logger.warn({ err }, 'spare sandbox not removed'))
      .finally(() => this.#discarding.delete(tracked));
    this.#discarding.add(tracked);
  }

  /**
   * The data directory is being removed: stops the spare (its worker and mounts, which a `rm -rf` of the
   * directory fails on) and removes its directory in place. Not a destroy: that moves the directory into
   * the data directory's trash, which it would make again. The record and the codebase go with the
   * database. Prepares no more; a second call waits for the first.
   */
  abandon(): Promise<void> {
    this.#closed = true;
    const spare = this.#spare;
    this.#spare = undefined;
    const log = (what: string) => (err: unknown) =>
      this.#plane.logger.warn({ err }, `spare sandbox ${what} (data directory removed)`);
    this.#abandoning ??= (async () => {
      const ready = await spare?.ready;
      if (ready === undefined) return;
      await this.#plane.stopSandbox(ready.sandboxId).catch(log('not stopped'));
      await removeTree(this.#plane.layout.sandbox(ready.sandboxId).dir).catch((err: unknown) => {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') log('directory not removed')(err);
      });
    })();
    return this.#abandoning;
  }

  /** Destroys the spare (and waits for earlier discards); prepares no more. */
  async close(): Promise<void> {
    if (this.#abandoning !== undefined) return this.#abandoning;
    this.#closed = true;
    if (this.#spare !== undefined) this.#discard(this.#spare);
    this.#spare = undefined;
    await Promise.all([...this.#discarding]);
  }
}
