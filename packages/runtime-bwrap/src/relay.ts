// Makes a sandbox's workspace reachable by the unprivileged sandbox user (sandbox-user.ts). bwrap runs as
// that user, so it resolves the workspace path with that user's permissions, and the data directory
// (often under /root) is private to root. The runtime contract puts the workspace in a directory P that is
// a shared mount; the runtime binds P (recursively) once per sandbox at R = <runDir>/<sandboxId> (runDir:
// root-owned, 0711, so a name can be reached but not listed) and makes R a slave of P: the worker's FUSE
// mount at P/workspace, and a remount after a worker restart, appear at R/workspace too, and nothing done
// at R (its unmount in particular) flows back to P. bwrap binds R/workspace.
//
// R is recorded in <stateDir>/bwrap-relay so a control plane that crashed can remove it (clearLeftovers).
import { chmod, mkdir, readFile, rm, rmdir, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { execa } from 'execa';
import { UnavailableError } from '@agentfense/protocol';

/** The file in a sandbox's stateDir naming its relay. */
const RELAY_RECORD = 'bwrap-relay';
/** How many stacked mounts at R we are prepared to peel off. */
const MAX_STACKED = 8;

async function isMountPoint(path: string): Promise<boolean> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  const escaped = path.replace(/[\\ \t\n]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
  return info.split('\n').some((line) => line.split(' ')[4] === escaped);
}

/** Creates the relay of one sandbox; returns the path bwrap binds at /workspace. */
export async function createRelay(options: {
  runDir: string;
  sandboxId: string;
  workspaceHostPath: string;
  stateDir: string;
}): Promise<string> {
  await clearRelay(options.stateDir);
  const parent = posix.dirname(options.workspaceHostPath);
  const relay = posix.join(options.runDir, options.sandboxId);
  await mkdir(options.runDir, { recursive: true, mode: 0o711 });
  await chmod(options.runDir, 0o711);
  await mkdir(relay, { recursive: true, mode: 0o711 });
  await writeFile(posix.join(options.stateDir, RELAY_RECORD), relay, { mode: 0o600 });
  // The bound directory's own mode applies at R: let the sandbox user pass through (not list) it.
  await chmod(parent, 0o711);
  // One mount(8) run: the propagation change is applied right after the bind.
  const args = ['--rbind', '--make-rslave', '--', parent, relay];
  const result = await execa('mount', args, { reject: false, stdin: 'ignore' });
  if (result.failed) {
    await clearRelay(options.stateDir);
    throw new UnavailableError(
      `could not bind the workspace for the sandbox user (\`mount ${args.join(' ')}\`, needs root): ${result.stderr || result.shortMessage}`,
    );
  }
  return posix.join(relay, posix.basename(options.workspaceHostPath));
}

/** Unmounts and removes the relay recorded in `stateDir` (if any). Idempotent. */
export async function clearRelay(stateDir: string): Promise<void> {
  const record = posix.join(stateDir, RELAY_RECORD);
  const relay = (await readFile(record, 'utf8').catch(() => '')).trim();
  if (relay === '') return;
  for (let i = 0; i < MAX_STACKED && (await isMountPoint(relay)); i++) {
    // Lazy: a command still holding the workspace must not keep the relay (or a stop) hanging.
    await execa('umount', ['-l', '--', relay], { reject: false, stdin: 'ignore' });
  }
  // Never rm -r: if the unmount failed, the directory is still the workspace's parent.
  await rmdir(relay).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  });
  await rm(record, { force: true });
}
