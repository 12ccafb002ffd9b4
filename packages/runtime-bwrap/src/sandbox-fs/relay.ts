// Makes a sandbox's workspace reachable by the unprivileged sandbox user (sandbox-user.ts). bwrap runs as
// that user, so it resolves the workspace path with that user's permissions, and the data directory
// (often under /root) is private to root. The runtime contract puts the workspace in a directory P that is
// a shared mount; the runtime binds P (recursively) once per sandbox at R = <runDir>/<sandboxId> and makes
// R a slave of P: the worker's FUSE
// mount at P/workspace, and a remount after a worker restart, appear at R/workspace too, and nothing done
// at R (its unmount in particular) flows back to P. bwrap binds R/workspace.
//
// R is recorded in <stateDir>/bwrap-relay so a control plane that crashed can remove it (clearLeftovers).
//
// A long-lived process (a session's shell) also gets an *anchor* (createAnchor), so it keeps following
// the workspace when the worker is replaced under it. Binding R/workspace gives the process a copy of the
// FUSE mount F of that moment; when F dies, that copy stays dead (its parent in the sandbox is bwrap's
// tmpfs root, which no host mount event reaches). So such a process binds two things at /workspace: first
// A/workspace, where A = <relay>.s-<uuid> is a NON-recursive bind of P made a slave of P just before the
// launch (so A/workspace is the bare directory under F), then F on top, as every command does. Now F's
// parent in the sandbox is a slave of P: the host's unmount of a dead F propagates in and removes the dead
// copy, and the next worker's mount at P/workspace propagates onto the bare directory, under the running
// process. (Checked on kernel 6.18: test/sessions/worker-restart.test.ts.) P is the control plane's small
// tmpfs (host-mounts.ts), so the bare directory shows in the sandbox's mountinfo as `/workspace` of that
// tmpfs, never as a path of the data directory.
import { randomUUID } from 'node:crypto';
import { mkdir, readFile, readdir, rm, rmdir, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { execFile } from 'node:child_process';
import { UnavailableError } from '@agentfense/protocol';
import { closeToOthers, prepareRunDir } from './run-dir.js';

/** The file in a sandbox's stateDir naming its relay. */
const RELAY_RECORD = 'bwrap-relay';
/**
 * Runs mount(8)/umount(8) with an argv array (no shell) and reports how it ended (never rejects).
 * child_process directly, not execa: execa's per-call machinery costs milliseconds on every sandbox start
 * under load (bench/README.md of the control package), and nothing of it is needed here.
 */
export function runMount(
  command: 'mount' | 'umount',
  args: readonly string[],
): Promise<{ failed: boolean; message: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { encoding: 'utf8' }, (err, _stdout, stderr) => {
      resolve({ failed: err !== null, message: stderr.trim() || (err?.message ?? '') });
    });
  });
}

/** How many stacked mounts at R we are prepared to peel off. */
const MAX_STACKED = 8;
/** Anchors are `<relay>.s-<uuid>`, next to their relay under runDir. */
const ANCHOR_INFIX = '.s-';

async function isMountPoint(path: string): Promise<boolean> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  const escaped = path.replace(/[\\ \t\n]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
  return info.split('\n').some((line) => line.split(' ')[4] === escaped);
}

/** Where a sandbox's relay is: named by its id under the run directory. */
export function relayPath(runDir: string, sandboxId: string): string {
  return posix.join(runDir, sandboxId);
}

/** Creates the relay of one sandbox; returns the path bwrap binds at /workspace. */
export async function createRelay(options: {
  runDir: string;
  sandboxId: string;
  workspaceHostPath: string;
  stateDir: string;
  /** The sandbox's group: the only one besides root that may pass through (run-dir.ts). */
  gid: number;
}): Promise<string> {
  const relay = relayPath(options.runDir, options.sandboxId);
  await clearRelay({ stateDir: options.stateDir, relay });
  const parent = posix.dirname(options.workspaceHostPath);
  await prepareRunDir(options.runDir);
  await mkdir(relay, { recursive: true, mode: 0o700 });
  await closeToOthers(relay, options.gid);
  await writeFile(posix.join(options.stateDir, RELAY_RECORD), relay, { mode: 0o600 });
  // The bound directory's own mode applies at R and at every anchor: the sandbox user passes through it,
  // nobody else does.
  await closeToOthers(parent, options.gid);
  // One mount(8) run: the propagation change is applied right after the bind.
  const args = ['--rbind', '--make-rslave', '--', parent, relay];
  const result = await runMount('mount', args);
  if (result.failed) {
    await clearRelay({ stateDir: options.stateDir, relay });
    throw new UnavailableError(
      `could not bind the workspace for the sandbox user (\`mount ${args.join(' ')}\`, needs root): ${result.message}`,
    );
  }
  return posix.join(relay, posix.basename(options.workspaceHostPath));
}

/** Lazily unmounts everything stacked at `dir`, then removes the (then empty) directory. Idempotent. */
export async function unmountAndRemove(dir: string): Promise<void> {
  for (let i = 0; i < MAX_STACKED && (await isMountPoint(dir)); i++) {
    // Lazy: a command still holding the workspace must not keep the relay (or a stop) hanging.
    await runMount('umount', ['-l', '--', dir]);
  }
  // Never rm -r: if the unmount failed, the directory is still the workspace's parent.
  await rmdir(dir).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  });
}

/**
 * Unmounts and removes a sandbox's relay and its anchors: the one recorded in `stateDir` and `relay`, the
 * path it has by the sandbox's id, where the caller knows it — so a state directory removed under a
 * running sandbox (a data directory deleted by hand, a teardown racing a start) leaves no mount behind.
 * Idempotent.
 */
export async function clearRelay(options: { stateDir: string; relay?: string }): Promise<void> {
  const record = posix.join(options.stateDir, RELAY_RECORD);
  const recorded = (await readFile(record, 'utf8').catch(() => '')).trim();
  for (const relay of new Set([recorded, options.relay ?? ''])) {
    if (relay === '') continue;
    const prefix = `${posix.basename(relay)}${ANCHOR_INFIX}`;
    for (const entry of await readdir(posix.dirname(relay)).catch(() => [] as string[])) {
      if (entry.startsWith(prefix)) await unmountAndRemove(posix.join(posix.dirname(relay), entry));
    }
    await unmountAndRemove(relay);
  }
  await rm(record, { force: true });
}

/** A long-lived process's anchor: bwrap binds `source` at /workspace before the workspace itself. */
export interface WorkspaceAnchor {
  /** A/workspace: the bare directory under the FUSE mount. */
  readonly source: string;
  /** Unmounts and removes the anchor. Idempotent. */
  release(): Promise<void>;
}

/**
 * Makes the anchor of one long-lived process (see the header): a non-recursive bind of the workspace's
 * parent P, a slave of P. Must be made right before the launch: a worker mounted at P/workspace after
 * this (a restart) appears at A/workspace too, and a process launched then would bind that mount instead
 * of the bare directory (still correct, but it would not follow the next restart).
 */
export async function createAnchor(options: {
  relayDir: string;
  workspaceHostPath: string;
  /** The sandbox's group (run-dir.ts); the mounted anchor shows P's root, closed the same way. */
  gid: number;
}): Promise<WorkspaceAnchor> {
  const dir = `${options.relayDir}${ANCHOR_INFIX}${randomUUID()}`;
  await mkdir(dir, { mode: 0o700 });
  let released: Promise<void> | undefined;
  const release = (): Promise<void> => (released ??= unmountAndRemove(dir));
  await closeToOthers(dir, options.gid).catch(async (err: unknown) => {
    await release();
    throw err;
  });
  // One mount(8) run: --bind is not recursive, so F at P/workspace is not copied; then the slave.
  const args = ['--bind', '--make-slave', '--', posix.dirname(options.workspaceHostPath), dir];
  const result = await runMount('mount', args);
  if (result.failed) {
    await release();
    throw new UnavailableError(
      `could not anchor the workspace for a long-lived command (\`mount ${args.join(' ')}\`, needs root): ${result.message}`,
    );
  }
  return { source: posix.join(dir, posix.basename(options.workspaceHostPath)), release };
}

/** Launches over an anchor made before one that missed it is kept anyway (the launcher logs a warning). */
export const ANCHOR_TRIES = 4;

/**
 * Whether the process `pid`, launched over an anchor, really sits on the anchor's bare directory: the
 * bottom mount at /workspace in its mount namespace is the anchor's, not the worker's FUSE mount.
 *
 * Why a launch can miss it: a worker that mounts at P/workspace between the anchor's creation and bwrap's
 * bind propagates onto A/workspace first, and bwrap's bind of that path then copies the FUSE mount instead
 * of the bare directory (a path always resolves to the top mount). Such a process sees the workspace for
 * now, but its /workspace's parent is bwrap's own root, which no host mount event reaches: after the next
 * worker restart it keeps the dead mount (ENOTCONN) for good. The sandbox's launcher starts while the worker
 * is still mounting, so this happened in CI; the caller relaunches.
 *
 * Read from /proc/<pid>/mountinfo (paths as the process sees them), never by touching the mount.
 */
export async function sitsOnAnchor(pid: number): Promise<boolean> {
  return anchoredIn(await readFile(`/proc/${String(pid)}/mountinfo`, 'utf8'));
}

/** `sitsOnAnchor` on a mountinfo text: the bottom mount at `mountPoint` is not a FUSE mount. */
export function anchoredIn(mountinfo: string, mountPoint = '/workspace'): boolean {
  const stacked = mountinfo
    .split('\n')
    .map((line) => line.split(' '))
    .filter((fields) => fields[4] === mountPoint);
  const ids = new Set(stacked.map((fields) => fields[0]));
  const bottom = stacked.find((fields) => !ids.has(fields[1]));
  if (bottom === undefined) return false;
  // Only the race's signature counts: the worker's FUSE mount at the bottom. Whether the anchor receives
  // propagation (a slave) depends on the workspace's parent being shared, which a launch again would not
  // change (runtime tests use plain directories there).
  const separator = bottom.indexOf('-', 6);
  if (separator < 0) return false;
  return !(bottom[separator + 1] ?? '').startsWith('fuse');
}
