// Who may pass through the directories that lead to a sandbox's workspace outside the private data
// directory: the run directory, each relay and each session anchor (relay.ts). The worker mounts with
// `allow_other` (the sandbox user is not the mounter), so the mount lets every uid in; what keeps other
// local users of the host out is that every directory on the way is closed to them. Each is owned by
// root with the sandbox user's group and mode 0710: root and the sandbox user (bwrap runs with that gid)
// may pass through, nobody may list, everyone else gets EACCES before reaching the mount
// (test/security/local-users.test.ts).
import { chmod, chown, lstat, mkdir } from 'node:fs/promises';
import { UnavailableError } from '@agentfense/protocol';

/** Mode of every directory leading to a workspace: root rwx, the sandbox user's group x, others nothing. */
export const PASS_THROUGH_MODE = 0o710;

/** Gives `path` (an existing directory) to root and the sandbox user's group, mode 0710. */
export async function closeToOthers(path: string, gid: number): Promise<void> {
  // chown first: between the two calls the directory is never open to a group that is not ours.
  await chown(path, 0, gid);
  await chmod(path, PASS_THROUGH_MODE);
}

/**
 * Creates (if needed) the run directory and closes it to everyone but root and the sandbox user's group.
 * Refuses a run directory that is not a root-owned directory, or that another sandbox user's group holds
 * (two control planes with different sandbox users sharing one run directory would lock each other out).
 */
export async function prepareRunDir(runDir: string, gid: number): Promise<void> {
  await mkdir(runDir, { recursive: true, mode: 0o700 });
  const info = await lstat(runDir);
  if (!info.isDirectory() || info.uid !== 0) {
    throw new UnavailableError(
      `the run directory ${runDir} must be a directory owned by root (found ${info.isDirectory() ? `owner uid ${String(info.uid)}` : 'no directory'}); remove it or name another one with the runtime option runDir`,
    );
  }
  if (info.gid !== 0 && info.gid !== gid) {
    throw new UnavailableError(
      `the run directory ${runDir} belongs to group ${String(info.gid)}, another sandbox user's: give each sandbox user its own run directory (runtime option runDir)`,
    );
  }
  await closeToOthers(runDir, gid);
}
