// Open flags the host layer relies on, including the ones Node does not export.
import { constants } from 'node:fs';

/** O_PATH (Linux, all architectures Node supports here): an fd that names an inode without opening it. */
export const O_PATH = 0o10000000;

/** Flags of every directory fd the walk opens: never follows a symlink, fails ENOTDIR on a non-directory. */
export const WALK_DIR_FLAGS = O_PATH | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** Flags of an fd used only to name an inode for chmod/utimes/fstat through its /proc magic link. */
export const PATH_ONLY_FLAGS = O_PATH | constants.O_NOFOLLOW;

/** The magic link of an fd of this process: resolves to exactly the inode the fd refers to. */
export function fdPath(fd: number): string {
  return `/proc/self/fd/${fd}`;
}
