// Whole-tree walks with directory fds: every syscall names its target as
// `/proc/self/fd/<dir fd>/<one name>`, so no path handed to the kernel grows with the tree's depth or its
// names' lengths, and no symlink is ever followed. Only one directory fd is open at a time: going back up
// opens `..` of the child and checks it is the directory we came from (dev + inode), so a tree moved
// under the walk fails loudly instead of walking somewhere else, and 100,000 levels need no more fds
// than one.
// Syscalls are synchronous (a few µs each, against 30-40 µs through the thread pool) and the walk yields
// to the event loop every few milliseconds, so health pings and other requests keep being served. The
// one exception is the unlink of a big file (removeFile).
import type { BigIntStats, PathLike } from 'node:fs';
import { closeSync, fstatSync, lstatSync, openSync, readdirSync, rmdirSync, unlinkSync } from 'node:fs';
import { unlink } from 'node:fs/promises';

import { fdPath, WALK_DIR_FLAGS } from './flags.js';
import { relJoin } from './rel-path.js';
import { Yielder } from './yielder.js';

export interface WalkVisitor {
  /**
   * Called for every entry below the root with its lstat and root-relative path, parents before children.
   * Return false for a directory to skip what is below it.
   */
  onEntry(st: BigIntStats, rel: string): boolean | void;
}

interface Frame {
  fd: number;
  readonly rel: string;
  readonly names: string[];
  index: number;
  readonly dev: bigint;
  readonly ino: bigint;
}

/**
 * Walks the tree below `root` (an absolute trusted path or a `/proc/self/fd/N` magic link; its last
 * component is opened O_NOFOLLOW). Missing root: nothing to walk.
 */
export async function walkTree(root: string, visitor: WalkVisitor): Promise<void> {
  const yielder = new Yielder();
  let fd: number;
  try {
    fd = openSync(root, WALK_DIR_FLAGS);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  const stack: Frame[] = [frame(fd, '')];
  try {
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as Frame;
      const name = top.names[top.index++];
      if (name === undefined) {
        stack.pop();
        const parent = stack[stack.length - 1];
        if (parent !== undefined) parent.fd = reopenParent(top, parent);
        else closeSync(top.fd);
        continue;
      }
      await yielder.maybe();
      const at = `${fdPath(top.fd)}/${name}`;
      let st: BigIntStats;
      try {
        st = lstatSync(at, { bigint: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // removed meanwhile
        throw err;
      }
      const rel = relJoin(top.rel, name);
      if (visitor.onEntry(st, rel) === false || !st.isDirectory()) continue;
      const child = openSync(at, WALK_DIR_FLAGS);
      stack.push(frame(child, rel));
      // One fd at a time: the parent is reopened through `..` when the child is done.
      closeSync(top.fd);
      top.fd = -1;
    }
  } finally {
    for (const f of stack) if (f.fd >= 0) closeSync(f.fd);
  }
}

/**
 * Removes `root` and everything below it without following any symlink and without building long
 * paths (a delta 3000 levels deep, or 25 levels of 200-character names, is removed like any other).
 * A missing root is not an error. Names need not be valid UTF-8 (they are handled as bytes).
 */
export async function removeTree(root: string): Promise<void> {
  const yielder = new Yielder();
  let rootSt: BigIntStats;
  try {
    rootSt = lstatSync(root, { bigint: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (!rootSt.isDirectory()) {
    await removeFile(root, rootSt);
    return;
  }
  const stack: RemoveFrame[] = [removeFrame(openSync(root, WALK_DIR_FLAGS), null)];
  try {
    while (stack.length > 0) {
      const top = stack[stack.length - 1] as RemoveFrame;
      const name = top.names[top.index++];
      if (name !== undefined) {
        await yielder.maybe();
        const at = inDir(top.fd, name);
        let st: BigIntStats;
        try {
          st = lstatSync(at, { bigint: true });
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
          throw err;
        }
        if (!st.isDirectory()) {
          await removeFile(at, st); // top.fd, which `at` names, stays open across the await
          continue;
        }
        const child = openSync(at, WALK_DIR_FLAGS);
        closeSync(top.fd);
        top.fd = -1;
        stack.push(removeFrame(child, name));
        continue;
      }
      // Everything below `top` is gone: go back up and remove it from its parent.
      stack.pop();
      const parent = stack[stack.length - 1];
      if (parent === undefined) {
        closeSync(top.fd);
        top.fd = -1;
        rmdirSync(root);
        break;
      }
      parent.fd = reopenParent(top, parent);
      top.fd = -1;
      rmdirSync(inDir(parent.fd, top.name as Buffer));
    }
  } finally {
    for (const f of stack) if (f.fd >= 0) closeSync(f.fd);
  }
}

/**
 * Files with at least this much allocated are unlinked in the thread pool: when its last link goes, the
 * host filesystem frees a file inside unlink(2), about 0.3 s per GiB written out on ext4, and the JS
 * thread must not stall that long (the sandbox's requests; the control plane's 2 s health ping).
 */
export const POOL_UNLINK_BYTES = 1n << 20n;

async function removeFile(path: PathLike, st: BigIntStats): Promise<void> {
  if (st.blocks * 512n >= POOL_UNLINK_BYTES) await unlink(path);
  else unlinkSync(path);
}

interface RemoveFrame {
  fd: number;
  readonly name: Buffer | null;
  readonly names: Buffer[];
  index: number;
  readonly dev: bigint;
  readonly ino: bigint;
}

function removeFrame(fd: number, name: Buffer | null): RemoveFrame {
  const st = fstatSync(fd, { bigint: true });
  const names = readdirSync(fdPath(fd), { encoding: 'buffer' });
  return { fd, name, names, index: 0, dev: st.dev, ino: st.ino };
}

/** `/proc/self/fd/<fd>/<name>` with the name as raw bytes. */
function inDir(fd: number, name: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${fdPath(fd)}/`), name]);
}

function frame(fd: number, rel: string): Frame {
  const st = fstatSync(fd, { bigint: true });
  const names = readdirSync(fdPath(fd));
  return { fd, rel, names, index: 0, dev: st.dev, ino: st.ino };
}

/** Opens `..` of the child's fd and checks it is `parent` (the tree did not move under us). */
function reopenParent(child: { fd: number }, parent: { readonly dev: bigint; readonly ino: bigint }): number {
  const fd = openSync(`${fdPath(child.fd)}/..`, WALK_DIR_FLAGS);
  const st = fstatSync(fd, { bigint: true });
  if (st.dev !== parent.dev || st.ino !== parent.ino) {
    closeSync(fd);
    throw Object.assign(new Error('a directory was moved while the tree was walked'), { code: 'ESTALE' });
  }
  closeSync(child.fd);
  return fd;
}
