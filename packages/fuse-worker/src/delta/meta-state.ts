// The in-memory index of a delta's metadata (whiteouts and base records) and the records that change it.
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
  /**
   * Record `base` for `path`, replacing any base recorded (a flatten: the lowest frozen layer's base
   * describes the codebase, the writable layer's only the view below it; flatten.ts).
   */
  | { readonly op: 'rebase'; readonly path: string; readonly base: BaseRecord }
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
 * One path component with what is recorded at it. A node exists while it or a node below it holds a
 * record: the index holds one name per level (a parent link and the name), never a path per level, so a
 * chain of N directories of long names costs O(N x name), not the O(N^2 x name) of a map keyed by paths
 * (1,200 nested 255-character directories: ~0.5 MiB instead of ~184 MiB per such map).
 */
interface MetaNode {
  readonly name: string;
  /** Changed only when a renamed directory's records move whole (#move). */
  parent: MetaNode | null;
  children: Map<string, MetaNode> | undefined;
  whiteout: boolean;
  base: BaseRecord | undefined;
}

/**
 * A copy of `name` that holds nothing else: a component sliced out of a longer path is a view on that
 * whole path in V8, which a node kept for the delta's life would keep alive with it.
 */
function ownCopy(name: string): string {
  return Buffer.from(name, 'utf16le').toString('utf16le');
}

/** The relative path of `node` ('' for the root), built when a caller needs it as a string. */
function pathOf(node: MetaNode): string {
  const names: string[] = [];
  for (let n = node; n.parent !== null; n = n.parent) names.push(n.name);
  return names.reverse().join('/');
}

/** `node` and every node below it, parents first. */
function* subtree(node: MetaNode): Generator<MetaNode> {
  const stack = [node];
  for (let n = stack.pop(); n !== undefined; n = stack.pop()) {
    yield n;
    if (n.children !== undefined) for (const child of n.children.values()) stack.push(child);
  }
}

/**
 * Whiteouts and base records, held in memory. Invariants: metadata lives only here and in meta/ on disk,
 * never in the upper tree, so no name the sandbox can create hides or deletes anything; a whiteout on P
 * hides the lower P and its whole subtree ("whiteouts checked before lower"); an upper directory at a
 * whited-out path is an opaque directory (its lower namesake contributes nothing).
 */
export class MetaState {
  readonly #root: MetaNode = {
    name: '',
    parent: null,
    children: undefined,
    whiteout: false,
    base: undefined,
  };
  #whiteouts = 0;
  #bases = 0;
  /** The last path found or made whole and its node; dropped whenever a node is removed (it may be one). */
  #memo: { readonly rel: string; readonly node: MetaNode } | undefined;

  /** Applies one record (live and on replay alike). */
  apply(record: MetaRecord): void {
    switch (record.op) {
      case 'whiteout': {
        const node = this.#make(record.path);
        if (!node.whiteout) this.#whiteouts++;
        node.whiteout = true;
        return;
      }
      case 'base': {
        const node = this.#make(record.path);
        if (node.base !== undefined) return;
        node.base = record.base;
        this.#bases++;
        return;
      }
      case 'rebase': {
        const node = this.#make(record.path);
        if (node.base === undefined) this.#bases++;
        node.base = record.base;
        return;
      }
      case 'unbase': {
        const node = this.#find(record.path);
        if (node?.base === undefined) return;
        node.base = undefined;
        this.#bases--;
        this.#prune(node);
        return;
      }
      case 'move':
        this.#move(record.from, record.to);
        return;
      case 'forget':
        this.#forget(record.path, record.subtree);
        return;
    }
  }

  /** The base recorded for `rel`, if any. */
  base(rel: string): BaseRecord | undefined {
    return this.#bases === 0 ? undefined : this.#find(rel)?.base;
  }

  /** Whether a base is recorded for `rel`. */
  hasBase(rel: string): boolean {
    return this.base(rel) !== undefined;
  }

  /** Whether `rel` itself is whited out (not an ancestor: isHidden answers that). */
  isWhiteout(rel: string): boolean {
    return this.#whiteouts > 0 && this.#find(rel)?.whiteout === true;
  }

  /** Names of the whited-out entries directly inside directory `rel`. */
  whiteoutsIn(rel: string): ReadonlySet<string> {
    const names = new Set<string>();
    if (this.#whiteouts === 0) return names;
    for (const child of this.#find(rel)?.children?.values() ?? []) if (child.whiteout) names.add(child.name);
    return names;
  }

  /** Every whited-out path ('a/b'), each built as it is yielded. */
  *whiteoutPaths(): Generator<string> {
    if (this.#whiteouts === 0) return;
    for (const node of subtree(this.#root)) if (node.whiteout) yield pathOf(node);
  }

  /**
   * True when the lower entry at `rel` is hidden: `rel` or one of its ancestors is whited out.
   * Cost: the walk below, then one step per level up; no syscalls.
   */
  isHidden(rel: string): boolean {
    if (this.#whiteouts === 0) return false;
    for (let n: MetaNode | null = this.#deepest(rel).node; n !== null; n = n.parent)
      if (n.whiteout) return true;
    return false;
  }

  /** True when some whiteout lies strictly below `rel`. */
  hasWhiteoutBelow(rel: string): boolean {
    const node = this.#whiteouts === 0 ? undefined : this.#find(rel);
    if (node === undefined) return false;
    for (const n of subtree(node)) if (n !== node && n.whiteout) return true;
    return false;
  }

  /** True when nothing is recorded. */
  get empty(): boolean {
    return this.#whiteouts === 0 && this.#bases === 0;
  }

  /** The state as a snapshot of `generation` (paths built for it, and dropped with it). */
  snapshot(generation: number): MetaSnapshot {
    const whiteouts: string[] = [];
    const bases: [string, BaseRecord][] = [];
    for (const node of subtree(this.#root)) {
      if (node.whiteout) whiteouts.push(pathOf(node));
      if (node.base !== undefined) bases.push([pathOf(node), node.base]);
    }
    return { version: 1, generation, whiteouts, bases };
  }

  /**
   * The snapshot of `generation` as JSON text, a piece at a time: one path in memory at once, where
   * `snapshot()` builds them all (a deep tree's paths are quadratic in its depth: ~184 MB for 1,200 levels
   * of 255-character names).
   */
  *snapshotText(generation: number): Generator<string> {
    yield `{"version":1,"generation":${String(generation)},"whiteouts":[`;
    let sep = '';
    for (const node of subtree(this.#root)) {
      if (!node.whiteout) continue;
      yield sep + JSON.stringify(pathOf(node));
      sep = ',';
    }
    yield '],"bases":[';
    sep = '';
    for (const node of subtree(this.#root)) {
      if (node.base === undefined) continue;
      yield sep + JSON.stringify([pathOf(node), node.base]);
      sep = ',';
    }
    yield ']}';
  }

  /** Replaces the state with a snapshot's. */
  load(snapshot: MetaSnapshot): void {
    this.#memo = undefined;
    this.#root.children = undefined;
    this.#whiteouts = 0;
    this.#bases = 0;
    for (const w of snapshot.whiteouts) this.apply({ op: 'whiteout', path: w });
    for (const [p, b] of snapshot.bases) this.apply({ op: 'base', path: p, base: b });
  }

  /** The node of `rel`, if one exists. */
  #find(rel: string): MetaNode | undefined {
    const found = this.#deepest(rel);
    return found.complete ? found.node : undefined;
  }

  /**
   * The deepest node on `rel`'s way down, and whether it is `rel`'s own. One Map lookup per component,
   * except below the last path found whole (`#memo`): one operation asks about one path several times,
   * and a walk down a chain asks about a child of the path before (each component of a path 1,200 levels
   * deep hashed again costs ~3 ms a question; comparing with the last one, microseconds).
   */
  #deepest(rel: string): { node: MetaNode; complete: boolean; rest: number } {
    let node = this.#root;
    let start = 0;
    const memo = this.#memo;
    if (memo !== undefined) {
      if (rel === memo.rel) return { node: memo.node, complete: true, rest: rel.length };
      // slice + === compares as memcmp does; startsWith goes character by character (~50x slower here).
      const length = memo.rel.length;
      if (rel.length > length && rel.charCodeAt(length) === 47 && rel.slice(0, length) === memo.rel) {
        node = memo.node;
        start = length + 1;
      }
    }
    if (rel === '') return { node, complete: true, rest: 0 };
    for (;;) {
      const slash = rel.indexOf('/', start);
      const child = node.children?.get(slash < 0 ? rel.slice(start) : rel.slice(start, slash));
      if (child === undefined) return { node, complete: false, rest: start };
      node = child;
      if (slash < 0) break;
      start = slash + 1;
    }
    this.#memo = { rel, node };
    return { node, complete: true, rest: rel.length };
  }

  /** The node of `rel`, made with its ancestors where missing. */
  #make(rel: string): MetaNode {
    const found = this.#deepest(rel);
    let node = found.node;
    if (found.complete) return node;
    for (let start = found.rest; ;) {
      const slash = rel.indexOf('/', start);
      node = this.#child(node, slash < 0 ? rel.slice(start) : rel.slice(start, slash));
      if (slash < 0) break;
      start = slash + 1;
    }
    // Nodes are only added here: what the memo names stays.
    this.#memo = { rel, node };
    return node;
  }

  #child(parent: MetaNode, name: string): MetaNode {
    let child = parent.children?.get(name);
    if (child === undefined) {
      const own = ownCopy(name);
      child = { name: own, parent, children: undefined, whiteout: false, base: undefined };
      (parent.children ??= new Map()).set(own, child);
    }
    return child;
  }

  /** Removes `node` and its ancestors while they hold nothing. */
  #prune(node: MetaNode): void {
    this.#memo = undefined;
    for (let n = node; n.parent !== null; n = n.parent) {
      if (n.whiteout || n.base !== undefined || n.children !== undefined) return;
      const siblings = n.parent.children;
      siblings?.delete(n.name);
      if (siblings?.size === 0) n.parent.children = undefined;
    }
  }

  #move(from: string, to: string): void {
    const source = this.#find(from);
    if (source?.children === undefined) return;
    if (!to.startsWith(`${from}/`) && this.#moveWhole(source, to)) return;
    // Only adds move: a base of an entry that existed in the codebase describes that codebase path.
    const moving: { names: string[]; base: BaseRecord; node: MetaNode }[] = [];
    for (const node of subtree(source)) {
      if (node === source || node.base === undefined || node.base.exists) continue;
      const names: string[] = [];
      for (let n: MetaNode = node; n !== source; n = n.parent as MetaNode) names.push(n.name);
      moving.push({ names: names.reverse(), base: node.base, node });
    }
    for (const { node } of moving) {
      node.base = undefined;
      this.#bases--;
    }
    for (const { node } of moving) this.#prune(node);
    const target = moving.length === 0 ? undefined : this.#make(to);
    for (const { names, base } of moving) {
      let node = target as MetaNode;
      for (const name of names) node = this.#child(node, name);
      if (node.base !== undefined) continue;
      node.base = base;
      this.#bases++;
    }
  }

  /**
   * The usual move, in O(children of `source`) instead of O(entries below it): when everything below is
   * an add (a directory the sandbox made, as rename allows) and the destination holds nothing below it,
   * the nodes change parent instead of being re-made one by one (1.2-6.5 ms for 789 entries). False when
   * the general move must run.
   */
  #moveWhole(source: MetaNode, to: string): boolean {
    const existing = this.#find(to);
    if (existing?.children !== undefined) return false;
    for (const node of subtree(source)) {
      if (node !== source && (node.whiteout || node.base?.exists === true)) return false;
    }
    const target = existing ?? this.#make(to);
    const children = source.children as Map<string, MetaNode>;
    for (const child of children.values()) child.parent = target;
    target.children = children;
    source.children = undefined;
    this.#prune(source);
    return true;
  }

  #forget(rel: string, subtreeToo: boolean): void {
    const node = this.#find(rel);
    if (node === undefined) return;
    for (const n of subtreeToo ? subtree(node) : [node]) {
      if (n.whiteout) this.#whiteouts--;
      if (n.base !== undefined) this.#bases--;
      n.whiteout = false;
      n.base = undefined;
    }
    if (subtreeToo) {
      node.children = undefined;
      this.#memo = undefined;
    }
    this.#prune(node);
  }
}
