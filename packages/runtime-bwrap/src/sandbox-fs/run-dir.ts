// Who may pass through the directories that lead to a sandbox's workspace outside the private data
// directory: each relay and each session anchor (relay.ts), under the run directory. The worker mounts
// with `allow_other` (the sandbox user is not the mounter), so the mount lets every uid in; what keeps
// other local users of the host, and every other sandbox's uid, out is that the way to it is closed to
// them. Each relay and anchor is owned by root with that sandbox's group and mode 0710: root and the
// sandbox's user (bwrap runs with its gid) may pass through, nobody may list, everyone else gets EACCES
// before reaching the mount (test/security/local-users.test.ts).
import { chmod, chown, lstat, mkdir } from 'node:fs/promises';
import { UnavailableError } from '@agentfense/protocol';

/** Mode of each relay and anchor: root rwx, the sandbox's group x, others nothing. */
export const PASS_THROUGH_MODE = 0o710;

/** Gives `path` (an existing directory) to root and the sandbox's group, mode 0710. */
export async function closeToOthers(path: string, gid: number): Promise<void> {
  // chown first: between the two calls the directory is never open to a group that is not ours.
  await chown(path, 0, gid);
  await chmod(path, PASS_THROUGH_MODE);
}

/**
 * Mode of the run directory itself: root's, others may pass through but not list it. Each sandbox has a
 * uid and group of its own, so no one group could stand for all of them; what closes the way to a
 * workspace is each relay and anchor (0710, root and that sandbox's group), not the run directory. By
 * name one reaches only the shared /etc (copies of world-readable host files and our generated ones) and
 * the compiled seccomp filter (the public deny list).
 */
export const RUN_DIR_MODE = 0o711;

/**
 * Creates (if needed) the run directory: root's, mode 0711. Refuses one that is not a root-owned
 * directory (someone else's directory would hold the relays).
 */
export async function prepareRunDir(runDir: string): Promise<void> {
  await mkdir(runDir, { recursive: true, mode: 0o700 });
  const info = await lstat(runDir);
  if (!info.isDirectory() || info.uid !== 0) {
    throw new UnavailableError(
      `the run directory ${runDir} must be a directory owned by root (found ${info.isDirectory() ? `owner uid ${String(info.uid)}` : 'no directory'}); remove it or name another one with the runtime option runDir`,
    );
  }
  if (info.gid !== 0) await chown(runDir, 0, 0);
  if ((info.mode & 0o7777) !== RUN_DIR_MODE) await chmod(runDir, RUN_DIR_MODE);
}
