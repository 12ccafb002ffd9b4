// Store-ahead: the read-ahead (read-ahead.ts) puts small files into the kernel's page cache of each file
// (FUSE_NOTIFY_STORE), so the walker that is about to read them finds the pages there and sends no READ.
// Each READ a cold `grep -r` sends costs a round trip, and its completion makes the kernel mark the file's
// atime stale (fuse_invalidate_atime), so the next stat of it costs another; a stored page does neither.
//
// What may be stored is exactly what a READ would return right then, to a sandbox that may read it and
// cannot change it, and only while nothing asks to see every read:
// - the rules give the path `read`, exactly: with `write` the sandbox could change the page between our
//   read of the codebase file and the store landing, and the store would then put the old bytes back over
//   its write (the kernel copies a store over an up-to-date page). `view` and `none` are never read ahead.
// - the node is one the kernel holds (it was handed out by a lookup or a listing), has a single name (a
//   hard link could carry other rules), and is served from the codebase layer; its version (ino, size,
//   mtime, ctime) was reported to the kernel with its attributes and is smaller than STORE_BYTES.
// - no allowed-access audit (`audit.allowed`): with it every READ must reach the worker to be recorded.
// This file checks all of that when it makes a job; the binding's fetch threads then read each file whole
// and store it only if its fstat, before and after the read, still shows exactly that version, and if no
// invalidation of file contents was asked for since the job was made: KernelCache bumps the binding's
// store epoch before each one (Invalidator.beforeContents), and every notification waits for the stores
// in progress, so a store either sees the bump and is dropped or reaches the kernel before the
// invalidation (packages/fuse-native/README.md, storeAhead). Rules, discards, commits, writeFile and switching the
// audit on all invalidate every node (invalidateAll); a codebase file seen changed invalidates its node.
// The stores run off the JS thread: the kernel locks each page it fills, and a reader whose READ waits for
// the JS thread may hold that lock.
import type { FsCore } from './core.js';
import { atLeast } from '@agentfense/protocol';

/** Only a file smaller than this is stored (read whole by one pread). */
export const STORE_BYTES = 64 * 1024;

/**
 * The binding's storeAhead: each `name\0version\0` of `strings` in the directory open as `dirFd` is read
 * and stored into the page cache of node `nodes[i]` (node 0: the host's read-ahead of its first `maxBytes`
 * only); resolves with a status byte per node (STORED, NO_NODE, 0). Never rejects.
 */
export type FileBatch = (
  dirFd: number,
  maxBytes: number,
  nodes: Float64Array,
  strings: Buffer,
) => Promise<Buffer>;

const STORED = 1;
/** The kernel did not hold the node: a listing's reply not taken in yet, or a node it forgot. */
const NO_NODE = 2;

/** What a read-ahead batch did. */
export interface ReadAheadResult {
  readonly stored: number;
  /** Files not stored because the kernel did not hold their nodes (yet): worth a second try later. */
  readonly noNode: string[];
}

/** The read-ahead's file I/O for one PolicyFs: stores where they qualify, host read-ahead elsewhere. */
export class StoreAhead {
  /** The binding's storeAhead, set once mounted; without it nothing is read ahead. */
  files: FileBatch | undefined;
  /** Whether qualifying files are stored (the storeAhead feature); else every file is only warmed. */
  storing = false;

  /**
   * Reads ahead `names` (regular files listed in directory node `dir`, at `dirPath`) from the codebase
   * layer: stores those that qualify when `store` is set (see the file's head), starts the host's
   * read-ahead of the others the rules let the sandbox read; files served from the delta, and files the
   * sandbox may not read, are left alone. Never rejects.
   */
  async readAhead(
    fs: FsCore,
    dir: number,
    dirPath: string,
    names: readonly string[],
    store: boolean,
  ): Promise<ReadAheadResult> {
    const files = this.files;
    if (files === undefined) return { stored: 0, noNode: [] };
    const storing = store && this.storing && !fs.audit.allowed;
    const nodes: number[] = [];
    const sent: string[] = [];
    let text = '';
    for (const name of names) {
      const path = dirPath === '/' ? `/${name}` : `${dirPath}/${name}`;
      const permission = fs.rules.permissionOf(path);
      if (!atLeast(permission, 'read') || !fs.delta.servedFromLower(path)) continue;
      const job = storing && permission === 'read' ? storeJob(fs, dir, name) : undefined;
      nodes.push(job?.ino ?? 0);
      sent.push(name);
      text += `${name}\0${job?.version ?? ''}\0`;
    }
    if (nodes.length === 0) return { stored: 0, noNode: [] };
    // The directory fd stays open until every job has opened its file; without a cached one, nothing.
    const done = fs.delta.withLowerDir(dirPath, (dirFd) =>
      files(dirFd, STORE_BYTES, Float64Array.from(nodes), Buffer.from(text)),
    );
    const status = done === undefined ? undefined : await done.catch(() => undefined);
    let stored = 0;
    const noNode: string[] = [];
    for (let i = 0; status !== undefined && i < sent.length; i++) {
      if (status[i] === STORED) stored++;
      else if (status[i] === NO_NODE) noNode.push(sent[i]!);
    }
    return { stored, noNode };
  }
}

/** A store job for `name` in `dir` if its node qualifies (the path's rules were checked: `read`). */
function storeJob(fs: FsCore, dir: number, name: string): { ino: number; version: string } | undefined {
  const node = fs.inodes.child(dir, name);
  if (node === undefined || node.nlookup === 0 || node.isDir || node.links !== undefined) return undefined;
  const version = fs.cache.lowerVersionOf(node);
  if (version === undefined) return undefined;
  const size = Number(version.size);
  if (!(size > 0 && size < STORE_BYTES)) return undefined;
  // The binding compares this with its fstat of the opened file, before and after the read.
  return { ino: node.ino, version: `${version.ino}:${version.size}:${version.mtimeNs}:${version.ctimeNs}` };
}
