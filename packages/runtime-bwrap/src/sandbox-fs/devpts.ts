// The sandbox's own devpts, bounded (@agentfense/protocol runtime/devpts.ts says why). bwrap's `--dev`
// mounts a devpts of its own in the sandbox's user namespace, where no option of bwrap sets `max=`, and
// nothing inside may mount (no capability, seccomp). So the runtime (root) mounts one instance per
// sandbox on the host, at D/pts where D = <runDir>/<sandboxId>.dev, and every bwrap of the sandbox (its
// launcher, each command, each session's shell) binds it over /dev/pts after `--dev`: all of them share
// the sandbox's SANDBOX_PTY_MAX ptys, and bwrap's own instance beneath it stays empty and out of reach.
//
// The bind must be `--dev-bind`: bwrap's `--bind` adds `nodev`, and opening ptmx there fails with EACCES.
// D is root's with the sandbox's group, 0710 (run-dir.ts), like the relay: the instance's root is 0755
// and its ptmx 0666, so without D any local user could take the sandbox's ptys.
import { lstat, mkdir } from 'node:fs/promises';
import { posix } from 'node:path';
import { UnavailableError, devptsMountOptions } from '@agentfense/protocol';
import { closeToOthers, prepareRunDir } from './run-dir.js';
import { runMount, unmountAndRemove } from './relay.js';

/** D of one sandbox: holds the mount point `pts`. */
function devptsDir(runDir: string, sandboxId: string): string {
  return posix.join(runDir, `${sandboxId}.dev`);
}

/** Mounts the sandbox's devpts (at most `max` ptys); returns the host path bwrap binds at /dev/pts. */
export async function createDevpts(options: {
  runDir: string;
  sandboxId: string;
  /** The sandbox's group: the only one besides root that may pass through D. */
  gid: number;
  max?: number;
}): Promise<string> {
  await clearDevpts(options.runDir, options.sandboxId);
  const dir = devptsDir(options.runDir, options.sandboxId);
  const mountPoint = posix.join(dir, 'pts');
  await prepareRunDir(options.runDir);
  await mkdir(dir, { mode: 0o700 });
  await closeToOthers(dir, options.gid);
  await mkdir(mountPoint, { mode: 0o700 });
  const args = ['-t', 'devpts', '-o', devptsMountOptions(options.max), '--', 'devpts', mountPoint];
  const result = await runMount('mount', args);
  if (result.failed) {
    await clearDevpts(options.runDir, options.sandboxId);
    throw new UnavailableError(
      `could not mount the sandbox's devpts (\`mount ${args.join(' ')}\`, needs root): ${result.message}`,
    );
  }
  return mountPoint;
}

/** Unmounts and removes the sandbox's devpts and D, if any. Idempotent; cheap when there is none. */
export async function clearDevpts(runDir: string, sandboxId: string): Promise<void> {
  const dir = devptsDir(runDir, sandboxId);
  const exists = await lstat(dir).then(
    () => true,
    (err: unknown) => {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    },
  );
  if (!exists) return;
  // Lazy, like the relay's: a process still holding a pty must not keep the stop hanging.
  await unmountAndRemove(posix.join(dir, 'pts'));
  await unmountAndRemove(dir);
}
