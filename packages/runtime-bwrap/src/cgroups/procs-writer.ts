// The cgroup.procs writer of a sandbox's cgroups (v1 and v2); the other cgroup file operations are
// @agentfense/protocol's (runtime/cgroups/files.ts).
import { closeSync, constants, openSync, write } from 'node:fs';

/**
 * The cgroup.procs files of one sandbox, opened once (at its first command) and kept open until its
 * cgroups are destroyed: joining them is then one write(2) per hierarchy instead of open, write, close.
 * Writes stay asynchronous (a move can wait for an RCU grace period in the kernel: 5-14 ms for one move in
 * four measured under load, which must not block the event loop). close() waits for writes in flight, so
 * no write can ever land on a descriptor number that was closed and reused for another file.
 */
export class ProcsWriter {
  readonly #files: readonly string[];
  #fds: number[] | undefined;
  #closed = false;
  readonly #inFlight = new Set<Promise<unknown>>();

  constructor(files: readonly string[]) {
    this.#files = files;
  }

  /** Moves `pid` into every cgroup (in parallel). Rejects once closed. */
  async join(pid: number): Promise<void> {
    if (this.#closed) throw new Error('the sandbox cgroups are being removed');
    this.#fds ??= this.#open();
    const value = Buffer.from(String(pid));
    const writes = Promise.all(
      this.#fds.map(
        (fd) =>
          new Promise<void>((resolve, reject) => {
            write(fd, value, 0, value.length, null, (err) => (err === null ? resolve() : reject(err)));
          }),
      ),
    );
    this.#inFlight.add(writes);
    try {
      await writes;
    } finally {
      this.#inFlight.delete(writes);
    }
  }

  /** Refuses further joins, waits for those in flight, closes the files. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.allSettled([...this.#inFlight]);
    for (const fd of this.#fds ?? []) closeSync(fd);
    this.#fds = undefined;
  }

  #open(): number[] {
    const fds: number[] = [];
    try {
      for (const file of this.#files) fds.push(openSync(file, constants.O_WRONLY));
    } catch (err) {
      for (const fd of fds) closeSync(fd);
      throw err;
    }
    return fds;
  }
}
