// The inode table of the low-level FUSE API: kernel node ids <-> positions in the merged tree.
// Invariants:
// - Every node the kernel knows has nlookup >= 1; a node is dropped when the kernel forgets it to zero.
// - A node is reachable from its parent's `children` under `name` unless it was unlinked (orphan: it
//   stays until forgotten so open files keep working, but has no path for new operations).
// - A hard-linked node has one primary name (`parent`/`name`, which gives its path) and its other names in
//   `links`; removing or renaming the primary name promotes another one, so a node loses its path only
//   when its last name goes. `links` is undefined while the node has one name (never an empty array).
// - `children` is undefined while a node has no known child (every file, and a directory none of whose
//   entries the kernel holds): the table holds one node per entry the kernel knows, so what a node costs
//   is multiplied by the size of the tree a sandbox walks (bench/README.md, "Memory per known entry").
// - Node ids are never reused within a worker's life (the generation stays 0).
// Paths are computed by walking parents (O(depth)), so a directory rename is O(1).

/** Node id of the mount's root directory (fixed by the FUSE protocol). */
export const ROOT_INO = 1;

/** A node the kernel holds a reference to. */
export interface Inode {
  readonly ino: number;
  /** Parent node id; 0 for the root and for orphans. */
  parent: number;
  name: string;
  nlookup: number;
  isDir: boolean;
  /**
   * The st_ino the sandbox sees: fixed at the first attr reply and kept for the node's life, so copy-up
   * and rename never change it (as on a disk); 0 until then.
   */
  stIno: number;
  /**
   * Further names of a hard-linked node (directory node id + entry name), besides `parent`/`name`;
   * undefined when it has none.
   */
  links: { parent: number; name: string }[] | undefined;
  /** Children the kernel has looked up (directories only); undefined until the first one. */
  children: Map<string, number> | undefined;
  /**
   * The codebase version of a file last reported to the kernel with its attributes, which
   * KernelCache.checkLowerVersion compares each new report with: host inode number and size (numbers
   * while they are safe integers, else bigints) and mtime and ctime in ns as lstat gave them. Undefined
   * until then, and for nodes not served from the codebase. Kept in the node (four fields, the two
   * bigints lstat made) rather than in a map of strings: ~290 -> ~85 bytes per file the kernel knows.
   */
  lowerIno: number | bigint | undefined;
  lowerSize: number | bigint | undefined;
  lowerMtimeNs: bigint | undefined;
  lowerCtimeNs: bigint | undefined;
}

/**
 * A node with one kernel lookup. Every field is written here, in one order, so all nodes share one V8 shape
 * (a field added later, or in another order, would give nodes several shapes and slower property access).
 */
function newNode(ino: number, parent: number, name: string, isDir: boolean, stIno: number): Inode {
  return {
    ino,
    parent,
    name,
    nlookup: 1,
    isDir,
    stIno,
    links: undefined,
    children: undefined,
    lowerIno: undefined,
    lowerSize: undefined,
    lowerMtimeNs: undefined,
    lowerCtimeNs: undefined,
  };
}

/** Node bookkeeping for one mount. */
export class InodeTable {
  readonly #nodes = new Map<number, Inode>();
  #nextIno = ROOT_INO + 1;

  constructor() {
    this.#nodes.set(ROOT_INO, newNode(ROOT_INO, 0, '', true, ROOT_INO));
  }

  /** The node with id `ino`, if the kernel still knows it. */
  get(ino: number): Inode | undefined {
    return this.#nodes.get(ino);
  }

  /** Number of live nodes (for stats). */
  get size(): number {
    return this.#nodes.size;
  }

  /** Codebase path of a node ('/' for the root); null for an orphan (unlinked while still referenced). */
  pathOf(ino: number): string | null {
    if (ino === ROOT_INO) return '/';
    const parts: string[] = [];
    let node = this.#nodes.get(ino);
    while (node !== undefined && node.ino !== ROOT_INO) {
      if (node.parent === 0) return null;
      parts.push(node.name);
      node = this.#nodes.get(node.parent);
    }
    if (node === undefined) return null;
    return `/${parts.reverse().join('/')}`;
  }

  /** Path of `name` inside directory `parent`, or null when the parent has no path. */
  childPath(parent: number, name: string): string | null {
    const dir = this.pathOf(parent);
    if (dir === null) return null;
    return dir === '/' ? `/${name}` : `${dir}/${name}`;
  }

  /** The known child `name` of `parent`, if any. */
  child(parent: number, name: string): Inode | undefined {
    const id = this.#nodes.get(parent)?.children?.get(name);
    return id === undefined ? undefined : this.#nodes.get(id);
  }

  /** Records one kernel lookup of `name` in `parent` (creating the node on first sight) and returns it. */
  remember(parent: number, name: string, isDir: boolean): Inode {
    const dir = this.#nodes.get(parent);
    if (dir === undefined) throw new Error(`inode ${parent} is not known`);
    const existing = this.child(parent, name);
    if (existing !== undefined && existing.isDir === isDir) {
      existing.nlookup++;
      return existing;
    }
    if (existing !== undefined) this.#unname(existing, parent, name);
    const ino = this.#nextIno++;
    const node = newNode(ino, parent, name, isDir, 0);
    this.#nodes.set(node.ino, node);
    (dir.children ??= new Map()).set(name, node.ino);
    return node;
  }

  /**
   * Reserves `count` node ids for the binding's create fast path (fs/native-creates.ts) and returns the
   * first: ids it does not use are never used (ids are never reused anyway).
   */
  lendIds(count: number): number {
    const first = this.#nextIno;
    this.#nextIno += count;
    return first;
  }

  /**
   * Records a node the binding made with a lent id (`ino`) and answered the kernel for: one lookup, the
   * st_ino it was shown. Whatever the table knew under that name is unnamed (the name was free on the host).
   */
  adopt(parent: number, name: string, ino: number, stIno: number): Inode {
    const dir = this.#nodes.get(parent);
    if (dir === undefined) throw new Error(`inode ${parent} is not known`);
    if (ino >= this.#nextIno || this.#nodes.has(ino)) throw new Error(`inode ${ino} was not lent`);
    const existing = this.child(parent, name);
    if (existing !== undefined) this.#unname(existing, parent, name);
    const node = newNode(ino, parent, name, false, stIno);
    this.#nodes.set(ino, node);
    (dir.children ??= new Map()).set(name, ino);
    return node;
  }

  /** Records an extra kernel reference to an existing node under a new name (hard link). */
  alias(ino: number, parent: number, name: string): Inode {
    const node = this.#nodes.get(ino);
    const dir = this.#nodes.get(parent);
    if (node === undefined || dir === undefined) throw new Error(`inode ${ino} or ${parent} is not known`);
    const previous = this.child(parent, name);
    if (previous !== undefined && previous !== node) this.#unname(previous, parent, name);
    if (previous !== node) {
      (dir.children ??= new Map()).set(name, ino);
      // An orphan (every earlier name removed) gets its path back; otherwise this is one more name.
      if (node.parent === 0) {
        node.parent = parent;
        node.name = name;
      } else {
        (node.links ??= []).push({ parent, name });
      }
    }
    node.nlookup++;
    return node;
  }

  /** The kernel dropped `count` references; the node goes away at zero. */
  forget(ino: number, count: number): void {
    if (ino === ROOT_INO) return;
    const node = this.#nodes.get(ino);
    if (node === undefined) return;
    node.nlookup -= count;
    if (node.nlookup > 0) return;
    this.#detach(node);
    this.#nodes.delete(ino);
  }

  /** `name` was removed from `parent`: the node (if known) keeps its other names, else becomes an orphan. */
  unlink(parent: number, name: string): void {
    const node = this.child(parent, name);
    if (node !== undefined) this.#unname(node, parent, name);
  }

  /** Moves the child `name` of `parent` to `newName` in `newParent`, replacing what was there. */
  rename(parent: number, name: string, newParent: number, newName: string): void {
    const node = this.child(parent, name);
    const target = this.#nodes.get(newParent);
    if (target === undefined) return;
    const replaced = this.child(newParent, newName);
    if (replaced !== undefined && replaced !== node) this.#unname(replaced, newParent, newName);
    // rename(2) between two names of one inode does nothing.
    if (node === undefined || replaced === node) return;
    this.#unmap(parent, name, node.ino);
    if (node.parent === parent && node.name === name) {
      node.parent = newParent;
      node.name = newName;
    } else {
      const link = node.links?.find((l) => l.parent === parent && l.name === name);
      if (link !== undefined) {
        link.parent = newParent;
        link.name = newName;
      }
    }
    (target.children ??= new Map()).set(newName, node.ino);
  }

  /** Every live node except the root's parentless orphans, for cache invalidation after a rule change. */
  *entries(): IterableIterator<Inode> {
    yield* this.#nodes.values();
  }

  /** Every live node strictly below directory `ino`. */
  *descendants(ino: number): IterableIterator<Inode> {
    const children = this.#nodes.get(ino)?.children;
    if (children === undefined) return;
    for (const id of children.values()) {
      const child = this.#nodes.get(id);
      if (child === undefined || child.parent !== ino) continue;
      yield child;
      if (child.isDir) yield* this.descendants(child.ino);
    }
  }

  /** Removes every name of `node` (it is forgotten). */
  #detach(node: Inode): void {
    const links = node.links;
    node.links = undefined;
    if (links !== undefined) for (const link of links) this.#unmap(link.parent, link.name, node.ino);
    this.#unmap(node.parent, node.name, node.ino);
    node.parent = 0;
  }

  /** Removes one name of `node`; removing the primary name promotes another, or orphans the node. */
  #unname(node: Inode, parent: number, name: string): void {
    this.#unmap(parent, name, node.ino);
    const links = node.links;
    if (node.parent === parent && node.name === name) {
      const next = links?.shift();
      node.parent = next?.parent ?? 0;
      if (next !== undefined) node.name = next.name;
    } else if (links !== undefined) {
      const i = links.findIndex((l) => l.parent === parent && l.name === name);
      if (i >= 0) links.splice(i, 1);
    }
    if (links?.length === 0) node.links = undefined;
  }

  /** Removes `name` from `parent`'s children if it still names `ino`; an empty map goes with its last entry. */
  #unmap(parent: number, name: string, ino: number): void {
    const dir = this.#nodes.get(parent);
    const children = dir?.children;
    if (children === undefined || children.get(name) !== ino) return;
    children.delete(name);
    if (children.size === 0) dir!.children = undefined;
  }
}
