// The workspace relay: how /workspace keeps following the host's workspace when the worker's FUSE mount
// is replaced under a running container (a crashed worker remounted).
//
// Binding the workspace path straight into the container does not do it when the FUSE mount F already
// exists at that path: the container gets a copy of F itself, and a later `umount F; mount F'` on the host
// never reaches it (measured: the container keeps the dead mount). Propagation only carries mounts made at
// a location *inside* a shared mount the container is a slave of. So, per sandbox, the runtime builds one:
//
//   1. R = <stateDir>/docker/relay-<uuid>: a NON-recursive bind of the workspace's parent directory P (which the
//      runtime contract puts on a shared mount), made a slave of P and then shared. R/<name> is the bare
//      directory under F: whatever is later mounted or unmounted at P/<name> on the host happens at
//      R/<name> too, and nothing flows back to P.
//   2. The container binds R/<name> with rslave (a slave of R), while nothing is mounted there yet.
//   3. Then the current workspace (F) is bound at R/<name>: that mount propagates into the container.
//   4. Later, the host's `umount F` at P/<name> propagates to R/<name> and from there into the container,
//      and so does the new `mount F'`. Mounts made under the workspace propagate the same way.
//
// Needs root on the engine's host (the workspace bind already requires the engine to be local).
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rmdir } from 'node:fs/promises';
import { posix } from 'node:path';
import { execa } from 'execa';
import { InvalidArgumentError, UnavailableError } from '@agentfense/protocol';
import { unmountBelow } from '../setup/mounts.js';

/** A sandbox's relay: the path docker binds, then `attach()` once the container exists. */
export interface WorkspaceRelay {
  /** R/<name>: the bind source for /workspace. */
  readonly source: string;
  /** Binds the current workspace at `source` (propagates into the container). */
  attach(): Promise<void>;
  /** Lazily unmounts the relay and removes its directory. Idempotent. */
  release(): Promise<void>;
}

/** The propagation of the mount that holds `path`: its optional fields (`shared:N`, `master:N`) in mountinfo. */
export function propagationOf(
  mountinfo: string,
  path: string,
): { mountPoint: string; fields: string[] } | null {
  let best: { mountPoint: string; fields: string[] } | null = null;
  for (const line of mountinfo.split('\n')) {
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const fields = line.slice(0, sep).split(' ');
    const mountPoint = (fields[4] ?? '').replace(/\\([0-7]{3})/g, (_, o: string) =>
      String.fromCharCode(parseInt(o, 8)),
    );
    const inside = mountPoint === '/' || path === mountPoint || path.startsWith(`${mountPoint}/`);
    // Later lines are mounted later: at the same mount point the last one is on top.
    if (inside && (best === null || mountPoint.length >= best.mountPoint.length)) {
      best = { mountPoint, fields: fields.slice(6) };
    }
  }
  return best;
}

/**
 * Runs `mount OP -- A [B]` for each step in ONE process (a process start costs 5-20 ms on a loaded host;
 * a start needs up to five mounts). The script is constant; paths are its positional parameters.
 */
const MOUNT_STEPS_SCRIPT = [
  'while [ "$#" -ge 3 ]; do',
  '  if [ -n "$3" ]; then mount "$1" -- "$2" "$3" || exit 1; else mount "$1" -- "$2" || exit 1; fi',
  '  shift 3',
  'done',
].join('\n');

async function mountSteps(steps: readonly (readonly [string, string, string?])[]): Promise<void> {
  const args = steps.flatMap(([op, a, b]) => [op, a, b ?? '']);
  const result = await execa('sh', ['-c', MOUNT_STEPS_SCRIPT, 'agentfense-mount', ...args], {
    reject: false,
    stdin: 'ignore',
  });
  if (result.failed) {
    const said = steps.map(([op, a, b]) => `mount ${op} -- ${a}${b === undefined ? '' : ` ${b}`}`).join('; ');
    throw new UnavailableError(
      `could not set up the workspace relay (\`${said}\`, needs root on the engine's host): ${result.stderr || result.shortMessage}`,
    );
  }
}

/** Relay directories are `<scratch>/relay-<uuid>`. */
const RELAY_PREFIX = 'relay-';

/**
 * Never `rm -r` a relay: while mounted, it IS the workspace's parent. Unmount, then rmdir (which fails on
 * a directory that is still a mount point or not empty, deleting nothing).
 */
function rmdirIfPresent(dir: string): Promise<void> {
  return rmdir(dir).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  });
}

/**
 * Unmounts and removes every workspace relay under a sandbox's docker scratch directory
 * (`<stateDir>/docker`). A control plane that recovers from a crash must call this (or unmount everything
 * below the state directory) before it removes a sandbox's state directory recursively.
 */
export async function clearWorkspaceRelays(scratchDir: string): Promise<void> {
  await unmountBelow(scratchDir);
  for (const entry of await readdir(scratchDir).catch(() => [] as string[])) {
    if (entry.startsWith(RELAY_PREFIX)) await rmdirIfPresent(posix.join(scratchDir, entry));
  }
}

/** Refuses a workspace whose parent is not on a shared (or slave) mount: no relay could follow it. */
export async function checkRelayParent(workspaceHostPath: string): Promise<void> {
  const parent = posix.dirname(workspaceHostPath);
  const propagation = propagationOf(await readFile('/proc/self/mountinfo', 'utf8'), parent);
  if (propagation === null || !propagation.fields.some((f) => /^(shared|master):/.test(f))) {
    throw new InvalidArgumentError(
      `the workspace's parent ${parent} must be on a shared (or slave) mount so a remounted worker ` +
        `propagates into the container (e.g. \`mount --bind D D && mount --make-shared D\` for a parent D); ` +
        `it is on ${propagation?.mountPoint ?? '?'} with propagation ${propagation?.fields.join(' ') || 'private'}`,
    );
  }
}

/**
 * Builds the relay for `workspaceHostPath` in a new directory under `scratchDir` (step 1 above), after
 * clearing relays a crashed control plane left there; refuses a parent that is not on a shared mount.
 */
export async function createWorkspaceRelay(options: {
  workspaceHostPath: string;
  scratchDir: string;
  /**
   * A pooled container's slot (pool.ts): bound to the relay's bare directory, then the workspace attached,
   * all at once (the container already exists); attach() is then a no-op.
   */
  slot?: string;
}): Promise<WorkspaceRelay> {
  const parent = posix.dirname(options.workspaceHostPath);
  const name = posix.basename(options.workspaceHostPath);
  await checkRelayParent(options.workspaceHostPath);
  const scratch = options.scratchDir;
  await clearWorkspaceRelays(scratch); // relays a crashed control plane left for this sandbox
  const dir = posix.join(scratch, `${RELAY_PREFIX}${randomUUID()}`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  let released: Promise<void> | undefined;
  // Only this relay: a replacement instance of the same sandbox has its own.
  const release = (): Promise<void> =>
    (released ??= (async () => {
      await unmountBelow(dir, { inclusive: true });
      await rmdirIfPresent(dir);
    })());
  const source = posix.join(dir, name);
  const attach = ['--bind', options.workspaceHostPath, source] as const;
  try {
    await mountSteps([
      ['--bind', parent, dir],
      ['--make-slave', dir],
      ['--make-shared', dir],
      // The slot binds the bare directory BEFORE the workspace is attached there: a bind made afterwards
      // would copy the workspace mount itself and never see a remounted worker (step 1 above).
      ...(options.slot === undefined ? [] : ([['--bind', source, options.slot], attach] as const)),
    ]);
  } catch (err) {
    if (options.slot !== undefined) await unmountBelow(options.slot, { inclusive: true });
    await release();
    throw err;
  }
  return {
    source,
    attach: () => (options.slot === undefined ? mountSteps([attach]) : Promise.resolve()),
    release,
  };
}
