// The in-memory index of a delta's metadata (whiteouts and base records) and the records that change it.
import { relIsWithin } from '../host/rel-path.js';
import type { BaseRecord } from './identity.js';

/**
 * One journal record. `apply` is the only code that changes the index, both live and on replay, so a
 * reopened delta sees exactly the state the crashed worker had. Paths are layer-relative ('a/b').
 */
export type MetaRecord =
  /** Hide the lower entry at `path` and everything below it. */
  | { readonly op: 'whiteout'; readonly path: string }
  /** Record `base` for `path` unless a base is already recorded (first sight wins). */
  | { readonly op: 'base'; readonly path: string; readonly base: BaseRecord }
  /** Drop the base record of `path` (an add undone). */
  | { readonly op: 'unbase'; readonly path: string }
  /** Re-key the add records strictly below `from` to below `to` (a renamed directory the sandbox added). */
  | { readonly op: 'move'; readonly from: string; readonly to: string }
  /** Forget everything recorded at `path` (and below it when `subtree`): committed or discarded. */
  | { readonly op: 'forget'; readonly path: string; readonly subtree: boolean };

/** The compacted form written as the snapshot. */
export interface MetaSnapshot {
  readonly version: 1;
  /** Journal generation whose records apply on top of this snapshot. */
  readonly generation: number;
  readonly whiteouts: readonly string[];
  readonly bases: readonly (readonly [string, BaseRecord])[];
}

/**
 * Whiteouts and base records, held in memory. Invariants: metadata lives only here and in meta/ on disk,
 * never in the upper tree, so no name the sandbox can create hides or deletes anything; a whiteout on P
 * hides the lower P and its whole subtree ("whiteouts checked before lower"); an upper directory at a
 * whited-out path is an opaque directory (its lower namesake contributes nothing).
 */
export class MetaState {
  readonly whiteouts = new Set<string>();
  readonly bases = new Map<string, BaseRecord>();

  /** Applies one record (live and on replay alike). */
  apply(record: MetaRecord): void {
    switch (record.op) {
      case 'whiteout':
        this.whiteouts.add(record.path);
        return;
      case 'base':
        if (!this.bases.has(record.path)) this.bases.set(record.path, record.base);
        return;
      case 'unbase':
        this.bases.delete(record.path);
        return;
      case 'move':
        this.move(record.from, record.to);
        return;
      case 'forget':
        this.forget(record.path, record.subtree);
        return;
    }
  }

  /**
   * True when the lower entry at `rel` is hidden: `rel` or one of its ancestors is whited out.
   * Cost: one Set lookup per path component, no syscalls.
   */
  isHidden(rel: string): boolean {
    if (this.whiteouts.size === 0) return false;
    if (this.whiteouts.has(rel)) return true;
    for (let i = rel.indexOf('/'); i >= 0; i = rel.indexOf('/', i + 1)) {
      if (this.whiteouts.has(rel.slice(0, i))) return true;
    }
    return false;
  }

  /** True when some whiteout lies strictly below `rel`. */
  hasWhiteoutBelow(rel: string): boolean {
    for (const w of this.whiteouts) if (w !== rel && relIsWithin(w, rel)) return true;
    return false;
  }

  /** True when nothing is recorded. */
  get empty(): boolean {
    return this.whiteouts.size === 0 && this.bases.size === 0;
  }

  /** The state as a snapshot of `generation`. */
  snapshot(generation: number): MetaSnapshot {
    return { version: 1, generation, whiteouts: [...this.whiteouts], bases: [...this.bases] };
  }

  /** Replaces the state with a snapshot's. */
  load(snapshot: MetaSnapshot): void {
    this.whiteouts.clear();
    this.bases.clear();
    for (const w of snapshot.whiteouts) this.whiteouts.add(w);
    for (const [p, b] of snapshot.bases) this.bases.set(p, b);
  }

  private move(from: string, to: string): void {
    const prefix = `${from}/`;
    for (const [path, base] of [...this.bases]) {
      // Only adds move: a base of an entry that existed in the codebase describes that codebase path.
      if (!path.startsWith(prefix) || base.exists) continue;
      this.bases.delete(path);
      const moved = `${to}/${path.slice(prefix.length)}`;
      if (!this.bases.has(moved)) this.bases.set(moved, base);
    }
  }

  private forget(rel: string, subtree: boolean): void {
    const matches = (p: string): boolean => (subtree ? relIsWithin(p, rel) : p === rel);
    for (const w of [...this.whiteouts]) if (matches(w)) this.whiteouts.delete(w);
    for (const p of [...this.bases.keys()]) if (matches(p)) this.bases.delete(p);
  }
}
