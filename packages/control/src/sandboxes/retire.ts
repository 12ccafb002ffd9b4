// Removing a running sandbox record first (SandboxManager.retire): the run helper (cli/run-helper/)
// answers its client once the sandbox is gone from every listing, as the one-shot CLI's fast exit does
// (cli/forget-one-shot.ts), and tears the sandbox down after that answer. The directory is marked
// forgotten before the record goes, so a process that dies in between leaves it to the CLI's reapers and
// `agentfense gc`, never a directory nobody knows.
import { writeFile } from 'node:fs/promises';
import { removeTree } from '@agentfense/fuse-worker';
import { WrongStateError } from '@agentfense/protocol';
import type { SandboxStore } from '../store/sandboxes.js';
import type { KeyedLock } from './keyed-lock.js';
import type { Ownership } from './ownership.js';
import { partsOf } from './start.js';
import type { Live, StartDeps } from './start.js';
import { forgottenMarker } from './forgotten.js';
import { tearDown } from './teardown.js';

/** What retiring needs from the manager. */
export interface RetireDeps {
  readonly locks: KeyedLock;
  readonly store: SandboxStore;
  readonly live: Map<string, Live>;
  readonly owner: Ownership;
  readonly deps: StartDeps;
}

/** `forgotten`: the record is deleted; `removed`: processes, mounts and files are gone too. */
export interface Retiring {
  readonly forgotten: Promise<void>;
  readonly removed: Promise<void>;
}

/** Retires sandbox `id`, which must be running in this process. */
export function retireSandbox(d: RetireDeps, id: string): Retiring {
  let forgotten!: () => void;
  let failed!: (err: unknown) => void;
  const recordGone = new Promise<void>((resolve, reject) => {
    forgotten = resolve;
    failed = reject;
  });
  const removed = d.locks.run(id, async () => {
    const row = await d.store.get(id);
    const live = d.live.get(id);
    if (live === undefined || !d.owner.isMine(row)) {
      throw new WrongStateError(`sandbox ${id} is not running in this process`);
    }
    const paths = d.deps.layout.sandbox(id);
    await writeFile(paths.forgotten, forgottenMarker(), { mode: 0o600 });
    d.live.delete(id);
    await d.store.delete(id);
    forgotten();
    await tearDown(d.deps, {
      id,
      parts: partsOf(live),
      runtimeName: row.runtime,
      closeSessions: true,
      mountErrors: 'throw',
    });
    await removeTree(paths.dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err; // removed meanwhile: done
    });
    d.deps.hostUsers.releaseSandbox(paths);
    d.deps.logger.info({ sandboxId: id }, 'sandbox retired');
  });
  removed.catch(failed);
  return { forgotten: recordGone, removed };
}
