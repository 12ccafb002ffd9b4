// File access inside a codebase directory that never follows a symlink, even one planted concurrently
// (a sandbox's commit can put symlinks into a codebase). Node has no openat(2), so each step opens the
// next component relative to the previous directory's fd through /proc/self/fd/<fd>/<name> with
// O_NOFOLLOW: the magic link names exactly the directory we hold open, and O_NOFOLLOW refuses a symlink
// in the last position. No path string is ever resolved from the codebase root down in one go.
import { constants } from 'node:fs';
import type { Stats } from 'node:fs';
import { lstat, mkdir, open, readdir, rename, unlink } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { InvalidArgumentError, NotFoundError } from '@agentfense/protocol';

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK, O_WRONLY, O_CREAT, O_EXCL } = constants;

/** `name` inside the directory open as `dir`, as a path the kernel resolves through the fd. */
export function at(dir: FileHandle, name: string): string {
  return `/proc/self/fd/${dir.fd}/${name}`;
}

/** Names of in-progress uploads; hidden from listings. */
export const UPLOAD_TEMP_PREFIX = '.agentfense-upload-';

function describe(err: unknown, path: string): Error {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return new NotFoundError(`${path} does not exist in the codebase`, { cause: err });
  if (code === 'ELOOP' || code === 'ENOTDIR') {
    return new InvalidArgumentError(`${path}: a component is a symlink or not a directory`, {
      cause: err,
    });
  }
  return err as Error;
}

/**
 * Opens the directory `segments...` below the open `root` (roots.ts) component by component without
 * following symlinks; with `create`, missing directories are made (mode 0755). The caller closes both.
 */
export async function openDirChain(
  root: FileHandle,
  segments: readonly string[],
  options: { create?: boolean } = {},
): Promise<FileHandle> {
  // A handle of our own on the root: the magic link re-opens exactly the directory `root` holds.
  let dir = await open(`/proc/self/fd/${root.fd}`, O_RDONLY | O_DIRECTORY);
  try {
    for (let i = 0; i < segments.length; i++) {
      const name = segments[i] as string;
      if (options.create === true) {
        await mkdir(at(dir, name), { mode: 0o755 }).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'EEXIST') throw err;
        });
      }
      let next: FileHandle;
      try {
        next = await open(at(dir, name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
      } catch (err) {
        throw describe(err, segments.slice(0, i + 1).join('/'));
      }
      await dir.close();
      dir = next;
    }
    return dir;
  } catch (err) {
    await dir.close();
    throw err;
  }
}

/**
 * Opens `name` in `dir` for reading, refusing a symlink; the file must be a regular file. O_NONBLOCK:
 * opening a FIFO for reading otherwise waits for a writer, holding one of libuv's four I/O threads (five
 * downloads of a FIFO stall every file operation of the process). The type is checked on the opened
 * descriptor, so a name swapped after a check cannot slip through; O_NONBLOCK means nothing to a
 * regular file's reads.
 */
export async function openFileIn(dir: FileHandle, name: string, shown: string): Promise<FileHandle> {
  let file: FileHandle;
  try {
    file = await open(at(dir, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    throw describe(err, shown);
  }
  const st = await file.stat();
  if (!st.isFile()) {
    await file.close();
    const hint = st.isDirectory() ? ': list it instead' : ': only regular files can be downloaded';
    throw new InvalidArgumentError(`${shown} is ${kindOf(st)}, not a regular file${hint}`, {
      details: { path: shown, type: kindOf(st) },
    });
  }
  return file;
}

/** What a file is, for error messages. */
export function kindOf(st: Stats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isSymbolicLink()) return 'a symlink';
  return 'a special file';
}

/** Creates a fresh temporary file in `dir` (never an existing name, never through a symlink). */
export async function createTempIn(
  dir: FileHandle,
  name: string,
): Promise<{ file: FileHandle; path: string }> {
  const path = at(dir, name);
  const file = await open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644);
  return { file, path };
}

/** lstat of `name` in `dir`, or undefined when it does not exist. */
export async function lstatIn(dir: FileHandle, name: string): Promise<Stats | undefined> {
  try {
    return await lstat(at(dir, name));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** Atomically replaces `name` in `dir` with `tempName` (a symlink at `name` is replaced, not followed). */
export async function renameIn(dir: FileHandle, tempName: string, name: string): Promise<void> {
  await rename(at(dir, tempName), at(dir, name));
}

export async function unlinkIn(dir: FileHandle, name: string): Promise<void> {
  await unlink(at(dir, name)).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
}

/** The names in `dir` (sorted), with their lstat. */
export async function listDir(dir: FileHandle): Promise<{ name: string; stats: Stats }[]> {
  const names = (await readdir(`/proc/self/fd/${dir.fd}`)).sort();
  const out: { name: string; stats: Stats }[] = [];
  for (const name of names) {
    const stats = await lstatIn(dir, name);
    if (stats !== undefined) out.push({ name, stats });
  }
  return out;
}

/** Opens subdirectory `name` of `dir` without following a symlink. */
export async function openSubdir(dir: FileHandle, name: string): Promise<FileHandle> {
  return open(at(dir, name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
}
