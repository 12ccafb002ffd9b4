// A crash injected at the n-th step of a layer operation: every wrapped function is one step, the
// `crashAt`-th throws, and so does every call after it, as nothing runs in a dead process.
import { vi } from 'vitest';

export class Crash extends Error {}

export interface Failpoint {
  /** Steps that ran before the crash (all of them with crashAt Infinity). */
  steps(): number;
  /** Makes each of `names` (default: every own key) of `target` a step. */
  wrap<T extends object>(target: T, names?: readonly (keyof T & string)[]): Failpoint;
}

/** `onStep` sees each step that runs, by name and number, before it runs. */
export function failpoint(crashAt: number, onStep?: (name: string, step: number) => void): Failpoint {
  let steps = 0;
  let dead = false;
  const point: Failpoint = {
    steps: () => steps,
    wrap(target, names = Object.keys(target) as (keyof typeof target & string)[]) {
      for (const name of names) {
        const original = target[name] as (...args: unknown[]) => unknown;
        vi.spyOn(target, name as never).mockImplementation(function (this: unknown, ...args: unknown[]) {
          if (dead) throw new Crash('dead');
          if (steps === crashAt) {
            dead = true;
            throw new Crash(`died before ${name}`);
          }
          onStep?.(name, steps);
          steps++;
          return original.apply(this, args);
        } as never);
      }
      return point;
    },
  };
  return point;
}
