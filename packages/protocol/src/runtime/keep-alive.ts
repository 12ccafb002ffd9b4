// Whether a child process keeps this process's event loop alive. Node counts the child itself and each of
// its stdio pipes and sockets separately, so all of them are switched together. Something started ahead
// and idle (a pooled worker, a spare sandbox's launcher) need not keep a process alive that has nothing
// else to do: it ends by itself when this process exits and its connection closes.
import type { ChildProcess } from 'node:child_process';

interface Refable {
  ref(): unknown;
  unref(): unknown;
}

const refable = (value: unknown): value is Refable =>
  typeof (value as Partial<Refable> | null)?.ref === 'function' &&
  typeof (value as Partial<Refable> | null)?.unref === 'function';

/** Refs (`keep`) or unrefs a child process and every stdio stream of it that can be. */
export function keepChildAlive(child: ChildProcess, keep: boolean): void {
  for (const handle of [child, ...child.stdio]) {
    if (!refable(handle)) continue;
    if (keep) handle.ref();
    else handle.unref();
  }
}
