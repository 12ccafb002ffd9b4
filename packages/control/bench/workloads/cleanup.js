// Undo actions for everything the workloads bench starts (mounts, sandboxes, the control plane, temp
// directories), run newest first on success, on failure and on SIGINT/SIGTERM/SIGHUP, so that a run
// that dies half-way leaks no mount and no sandbox.
import console from 'node:console';
import process from 'node:process';

/** A stack of labelled undo actions; each runs at most once. */
export class Cleanup {
  #actions = [];
  #all;

  /**
   * Registers `undo` under `label` (named in the message when it fails). Returns a function that runs it
   * now and removes it from the stack (closing a mount as soon as its round is over).
   */
  add(label, undo) {
    const entry = { label, undo, done: undefined };
    this.#actions.push(entry);
    return () => this.#run(entry);
  }

  /** Runs every action not run yet, newest first; a failing one is reported and the others still run. */
  runAll() {
    this.#all ??= (async () => {
      for (const entry of [...this.#actions].reverse()) {
        await this.#run(entry).catch((err) =>
          console.error(`cleanup: ${entry.label} failed: ${err.message}`),
        );
      }
    })();
    return this.#all;
  }

  /** On SIGINT/SIGTERM/SIGHUP: run everything, then exit 130. */
  exitOnSignals() {
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
      process.once(signal, () => {
        console.error(`\nbench: ${signal}, cleaning up`);
        void this.runAll().finally(() => process.exit(130));
      });
    }
  }

  #run(entry) {
    entry.done ??= (async () => {
      try {
        await entry.undo();
      } finally {
        this.#actions.splice(this.#actions.indexOf(entry), 1);
      }
    })();
    return entry.done;
  }
}
