// Opening a codebase directory by its absolute path without following a symlink in ANY component, and
// pinning it to the identity (device, inode) it had when it was linked. Whoever owns a parent of a linked
// directory can swap that parent (or the directory) for a symlink or another directory; a root worker
// that follows it mounts, and commits into, whatever the swap points at.
//
// Why a walk and not openat2(RESOLVE_NO_SYMLINKS): Node has no openat2, and an addon means a native
// build on every install for one open per mount or API call. Walking from `/`, each component is opened
// with O_PATH|O_DIRECTORY|O_NOFOLLOW through `/proc/self/fd/<parent>/<name>` (the HostDir scheme): the
// magic link names exactly the directory already held, so a rename behind the walk cannot redirect it,
// and O_NOFOLLOW|O_DIRECTORY refuses a symlink in that position (ENOTDIR/ELOOP). That is the same
// guarantee as RESOLVE_NO_SYMLINKS for absolute paths without `.`/`..` (refused here).
import { constants } from 'node:fs';
import { lstat, open } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { InvalidArgumentError, NotFoundError, WrongStateError } from '@agentfense/protocol';
import type { DirIdentity } from '@agentfense/protocol';
import { fdPath, WALK_DIR_FLAGS } from './flags.js';

/** Flags of the directory fd handed back: readable (listings), still never a symlink. */
const FINAL_DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** What to say in errors: which codebase the directory belongs to, when known. */
export interface PinnedDirOptions {
  /** The identity recorded at link time; a different directory there is refused. */
  readonly identity?: DirIdentity | undefined;
  /** Names the directory in errors (`codebase cb_…`); default "the codebase directory". */
  readonly label?: string;
}

/**
 * Opens the absolute directory `path` (readable fd) without following any symlink on the way, and, given
 * `identity`, refuses a directory that is not the recorded one. Errors name the component at fault.
 */
export async function openPinnedDir(path: string, options: PinnedDirOptions = {}): Promise<FileHandle> {
  const label = options.label ?? 'the codebase directory';
  const parts = splitAbsolute(path, label);
  let dir = await open('/', WALK_DIR_FLAGS);
  try {
    for (let i = 0; i < parts.length; i++) {
      const last = i === parts.length - 1;
      const step = `${fdPath(dir.fd)}/${parts[i] as string}`;
      let next: FileHandle;
      try {
        next = await open(step, last ? FINAL_DIR_FLAGS : WALK_DIR_FLAGS);
      } catch (err) {
        throw await walkError(err, '/' + parts.slice(0, i + 1).join('/'), path, label);
      }
      await dir.close();
      dir = next;
    }
    if (parts.length === 0) {
      const root = await open('/', FINAL_DIR_FLAGS);
      await dir.close();
      dir = root;
    }
    if (options.identity !== undefined) {
      const now = await identityOf(dir);
      if (now.dev !== options.identity.dev || now.ino !== options.identity.ino) {
        throw new WrongStateError(
          `${label} ${path} is not the directory that was linked (it was device ${options.identity.dev} inode ` +
            `${options.identity.ino}, now device ${now.dev} inode ${now.ino}): it was replaced or moved. ` +
            'Link the directory again to use what is there now.',
          { details: { path, linked: options.identity, found: now } },
        );
      }
    }
    return dir;
  } catch (err) {
    await dir.close();
    throw err;
  }
}

/** The (device, inode) of an open file, as decimal strings (64-bit values cross msgpack and JSON intact). */
export async function identityOf(handle: FileHandle): Promise<DirIdentity> {
  const st = await handle.stat({ bigint: true });
  return { dev: st.dev.toString(), ino: st.ino.toString() };
}

function splitAbsolute(path: string, label: string): string[] {
  if (!path.startsWith('/') || path.includes('\0')) {
    throw new InvalidArgumentError(`${label} must be an absolute path without NUL bytes (got ${path})`);
  }
  const parts = path.split('/').filter((p) => p !== '');
  if (parts.some((p) => p === '.' || p === '..')) {
    throw new InvalidArgumentError(`${label} ${path} must not contain "." or ".." components`);
  }
  return parts;
}

async function walkError(err: unknown, prefix: string, path: string, label: string): Promise<Error> {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') {
    return new NotFoundError(`${label} ${path} does not exist any more (${prefix} is missing)`, {
      cause: err,
      details: { path, missing: prefix },
    });
  }
  if (code === 'ENOTDIR' || code === 'ELOOP') {
    const st = await lstat(prefix).catch(() => undefined);
    const what = st?.isSymbolicLink() === true ? 'a symlink' : 'not a directory';
    return new WrongStateError(
      `${label} ${path} is refused: ${prefix} is ${what} now, and no symlink is followed on the way to a ` +
        'linked directory. Put the real directory back, or link the directory again by its real path.',
      { cause: err, details: { path, component: prefix } },
    );
  }
  return err as Error;
}
