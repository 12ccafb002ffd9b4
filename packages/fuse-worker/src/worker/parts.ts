// The worker's side of answers in parts (protocol wire/parts.ts): a source fills one part at a time up
// to PART_BYTES, and what is left waits under a cursor for the control plane's `more`.

import { NotFoundError, PART_BYTES } from '@agentfense/protocol';
import type { ChangeEntry, CommitConflict, ResultPart } from '@agentfense/protocol';

import type { DiffItem } from '../delta/diff.js';
import { randomHex } from '../host/random-hex.js';
import { Yielder } from '../host/yielder.js';

/** A part being filled (the same fields as ResultPart, writable). */
export interface PartFill {
  changes?: ChangeEntry[];
  diff?: string;
  binary?: string[];
  applied?: ChangeEntry[];
  conflicts?: CommitConflict[];
}

/** Produces an answer part by part. */
export interface PartSource {
  /** Adds up to about `budget` bytes to `part`; true when nothing is left. */
  fill(part: PartFill, budget: number): Promise<boolean>;
}

/** A cursor nobody asks for within this long is dropped with what it held. */
const CURSOR_IDLE_MS = 60_000;
/** At most this many unfinished answers are kept (the oldest goes first). */
const MAX_CURSORS = 16;

type ArrayKey = 'changes' | 'binary' | 'applied' | 'conflicts';

/** An array answered in slices of about `budget` bytes (estimated as UTF-8 of the strings). */
export function arraySource<K extends ArrayKey>(
  key: K,
  items: readonly NonNullable<PartFill[K]>[number][],
  bytesOf: (item: NonNullable<PartFill[K]>[number]) => number,
): PartSource {
  let index = 0;
  return {
    async fill(part, budget) {
      const out: unknown[] = ((part[key] as unknown[] | undefined) ??= []);
      const yielder = new Yielder();
      let used = 0;
      while (index < items.length) {
        const item = items[index] as NonNullable<PartFill[K]>[number];
        const bytes = bytesOf(item);
        if (used > 0 && used + bytes > budget) break;
        out.push(item);
        used += bytes;
        index++;
        await yielder.maybe();
      }
      return index >= items.length;
    },
  };
}

/** Several sources one after the other (commit: applied, then conflicts). */
export function sequenceSource(sources: readonly PartSource[]): PartSource {
  let index = 0;
  return {
    async fill(part, budget) {
      while (index < sources.length) {
        if (!(await (sources[index] as PartSource).fill(part, budget))) return false;
        index++;
      }
      return true;
    },
  };
}

/** `source`, calling `done` once its last part has been filled (the whole answer was handed out). */
export function onceDone(source: PartSource, done: () => void): PartSource {
  return {
    async fill(part, budget) {
      const finished = await source.fill(part, budget);
      if (finished) done();
      return finished;
    },
  };
}

/** A diff produced file by file; a single file's text longer than a part is cut across parts. */
export function diffSource(items: AsyncIterator<DiffItem>): PartSource {
  let pending = '';
  let done = false;
  return {
    async fill(part, budget) {
      let text = '';
      const maxChars = Math.floor(budget / 3); // a UTF-16 unit is at most 3 bytes of UTF-8
      for (;;) {
        if (pending.length > 0) {
          const room = maxChars - text.length;
          if (room <= 0) break;
          let cut = Math.min(room, pending.length);
          // Never split a surrogate pair: the halves would not survive encoding.
          const code = pending.charCodeAt(cut - 1);
          if (cut < pending.length && code >= 0xd800 && code <= 0xdbff) cut--;
          if (cut <= 0) break;
          text += pending.slice(0, cut);
          pending = pending.slice(cut);
          continue;
        }
        if (done) break;
        const next = await items.next();
        if (next.done === true) {
          done = true;
          break;
        }
        if ('binary' in next.value) (part.binary ??= []).push(next.value.binary);
        else pending = next.value.text;
      }
      part.diff = (part.diff ?? '') + text;
      return done && pending.length === 0;
    },
  };
}

/** Unfinished answers by cursor. */
export class PartStore {
  readonly #open = new Map<string, { source: PartSource; timer: NodeJS.Timeout }>();
  readonly #budget: number;

  constructor(budget = PART_BYTES) {
    this.#budget = budget;
  }

  /** The first part of an answer, and the cursor of the rest when there is more. */
  async first(source: PartSource): Promise<{ part: PartFill; next: string | undefined }> {
    const part: PartFill = {};
    if (await source.fill(part, this.#budget)) return { part, next: undefined };
    return { part, next: this.#keep(source) };
  }

  /** The next part under `cursor`. */
  async more(cursor: string): Promise<ResultPart> {
    const open = this.#open.get(cursor);
    if (open === undefined) {
      throw new NotFoundError(`no answer in progress under cursor ${cursor} (expired after 60 s idle?)`);
    }
    this.#open.delete(cursor);
    clearTimeout(open.timer);
    const part: PartFill = {};
    if (await open.source.fill(part, this.#budget)) return part;
    return { ...part, next: this.#keep(open.source) };
  }

  /** Drops every unfinished answer (unmount). */
  clear(): void {
    for (const { timer } of this.#open.values()) clearTimeout(timer);
    this.#open.clear();
  }

  #keep(source: PartSource): string {
    if (this.#open.size >= MAX_CURSORS) {
      const [oldest] = this.#open.keys();
      if (oldest !== undefined) {
        clearTimeout(this.#open.get(oldest)?.timer);
        this.#open.delete(oldest);
      }
    }
    const cursor = randomHex(12);
    const timer = setTimeout(() => this.#open.delete(cursor), CURSOR_IDLE_MS).unref();
    this.#open.set(cursor, { source, timer });
    return cursor;
  }
}

/** Estimated encoded size of a change entry. */
export function changeBytes(entry: ChangeEntry): number {
  return entry.path.length * 3 + 64;
}

/** Estimated encoded size of a conflict. */
export function conflictBytes(conflict: CommitConflict): number {
  return (conflict.path.length + conflict.reason.length) * 3 + 32;
}
