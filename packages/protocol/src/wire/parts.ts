// Answers larger than one frame (a change list of 200k paths, a diff of many big files, the applied list
// of a big commit) travel in parts: the worker answers with the first part and a `next` cursor, and the
// control plane asks `more` until no cursor is left. The frame limit stays a bound on memory per message.
import type { ChangeEntry, CommitConflict } from '../delta-types.js';

/** Bytes of payload a worker puts in one part: well under the 16 MiB frame, even at 3 bytes per char. */
export const PART_BYTES = 4 * 1024 * 1024;

/** One further part of a changes/diff/commit answer: arrays and text to append, and the next cursor. */
export interface ResultPart {
  readonly changes?: readonly ChangeEntry[];
  readonly diff?: string;
  readonly binary?: readonly string[];
  readonly applied?: readonly ChangeEntry[];
  readonly conflicts?: readonly CommitConflict[];
  readonly next?: string;
}

type Mergeable = { -readonly [K in keyof ResultPart]: ResultPart[K] };

/**
 * Completes a partial answer: while it has a `next` cursor, asks `more` and appends each part's arrays and
 * text to the first one's. Returns the whole answer without `next`.
 */
export async function collectParts<T extends object & { readonly next?: string }>(
  first: T,
  more: (cursor: string) => Promise<ResultPart>,
): Promise<Omit<T, 'next'>> {
  const { next: firstNext, ...whole } = first as T & Mergeable;
  const out = whole as Mergeable & Record<string, unknown>;
  let cursor = firstNext;
  while (cursor !== undefined) {
    const part = await more(cursor);
    for (const key of ['changes', 'binary', 'applied', 'conflicts'] as const) {
      const items = part[key];
      if (items === undefined || items.length === 0) continue;
      const merged = (out[key] ?? []) as unknown[];
      // push in a loop: spreading 100k+ items into push() overflows the call stack.
      for (const item of items) merged.push(item);
      (out as Record<string, unknown>)[key] = merged;
    }
    if (part.diff !== undefined) out.diff = `${out.diff ?? ''}${part.diff}`;
    cursor = part.next;
  }
  return out as Omit<T, 'next'>;
}
