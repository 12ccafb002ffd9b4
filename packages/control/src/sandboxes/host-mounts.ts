// The shared parent mount of each sandbox's FUSE mountpoint (a mount made later under a
// shared mount bound into the sandbox propagates into it, so a restarted worker's mount reaches a running
// sandbox). Always argv arrays, never a shell.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { listMounts } from '@agentfense/fuse-worker';
import { UnavailableError } from '@agentfense/protocol';

/** mount(8)/umount(8) with an argv array (no shell); child_process directly: execa costs ~50 ms to load. */
const run = promisify(execFile);

/** How many stacked mounts at one path we are prepared to peel off. */
const MAX_STACKED = 8;

/** True when something is mounted exactly at `path`. Reads mountinfo only (never stats `path`). */
export async function isMountPoint(path: string): Promise<boolean> {
  return (await listMounts()).some((m) => m.mountpoint === path);
}

/** Mount points at or below `dir` (mountinfo only). */
export async function mountsBelow(dir: string): Promise<string[]> {
  return (await listMounts()).map((m) => m.mountpoint).filter((p) => p === dir || p.startsWith(`${dir}/`));
}

/**
 * Mounts a tiny tmpfs at P and makes it a shared mount in a peer group of its own (private first: a mount
 * on a shared parent, as on systemd hosts, would otherwise join the parent's group and propagate the
 * sandbox's mounts across the host). A P that is already a mount point is only re-made shared.
 *
 * A tmpfs rather than a bind of P on itself: a long-lived sandbox process binds the bare directory under
 * the FUSE mount (runtime-bwrap's anchor, so it follows a restarted worker), and a sandbox's mountinfo
 * shows a bind's path inside its filesystem. On this tmpfs that path is `/workspace`; on the data
 * directory's filesystem it would be a host path of the data directory. Only root writes here (the
 * mountpoint directory), so the sizes are minimal.
 */
export async function makeSharedBind(path: string, known: { mounted?: boolean } = {}): Promise<void> {
  try {
    // One mount(8) run: it applies the propagation changes, in order, right after the mount. `known`: the
    // caller has just read the mount table.
    if (!(known.mounted ?? (await isMountPoint(path))))
      await run('mount', [
        '-t',
        'tmpfs',
        '-o',
        'mode=0700,size=64k,nr_inodes=16,nodev,nosuid,noexec',
        '--make-private',
        '--make-shared',
        '--',
        'agentfense',
        path,
      ]);
    else await run('mount', ['--make-private', '--make-shared', '--', path]);
  } catch (err) {
    throw new UnavailableError(
      `cannot make ${path} a shared mount (needs root and mount(8)): ${(err as Error).message}`,
      { cause: err },
    );
  }
}

/**
 * Lazily unmounts everything mounted at `path` (the shared bind and anything left on it), innermost
 * first. Call clearFuseMount() on the FUSE mountpoint below first: a hung FUSE daemon must be aborted
 * before anything walks through it. Returns how many mounts were removed.
 */
export async function unmountAll(path: string): Promise<number> {
  let removed = 0;
  for (let i = 0; i < MAX_STACKED; i++) {
    if (!(await isMountPoint(path))) return removed;
    await run('umount', ['-l', '--', path]);
    removed++;
  }
  throw new UnavailableError(`could not unmount everything at ${path}`);
}
