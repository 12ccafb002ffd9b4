// Request kinds by number, as the binding numbers them (OP_* in native/ll.h, exported as ll_ops).
import { addon } from './addon.js';
import type { LowLevelHandlers } from './types.js';

/** A handler's name, or forgetMulti (FORGET_MULTI, handed to the forget handler one inode at a time). */
export type OpName = keyof LowLevelHandlers | 'forgetMulti';

/** Handler names by op number; index 0 is unused. */
export const OP_NAMES = addon.ll_ops as readonly (OpName | '')[];

/** Op numbers by handler name. */
export const OP = Object.fromEntries(
  OP_NAMES.map((name, i) => [name, i]).filter(([name]) => name !== ''),
) as Record<OpName, number>;

/**
 * The handlers present, as the binding's `implemented` mask: a sum of powers of two, not a bitwise OR
 * (there are more than 32 ops; a double is exact up to 2^53). Ops without a handler are answered in C.
 */
export function implementedMask(handlers: LowLevelHandlers): number {
  let mask = 0;
  for (let i = 1; i < OP_NAMES.length; i++) {
    const name = OP_NAMES[i] as OpName;
    if (name !== 'forgetMulti' && typeof handlers[name] === 'function') mask += 2 ** i;
  }
  return mask;
}
