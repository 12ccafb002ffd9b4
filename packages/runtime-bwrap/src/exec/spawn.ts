// A long-lived process in the sandbox (sessions): raw pipes, no buffering, kill() takes the whole tree.
import type { ExecAudit, SandboxProcess } from '@agentfense/protocol';
import { InternalError, toSandboxProcess } from '@agentfense/protocol';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { launchBwrap } from './launch.js';
import type { LaunchOptions, LaunchedBwrap } from './launch.js';
import { sitsOnAnchor } from '../sandbox-fs/relay.js';

export interface RunSpawnOptions extends Omit<
  LaunchOptions,
  'mode' | 'stdin' | 'timeoutMs' | 'signal' | 'onStdout' | 'onStderr'
> {
  readonly audit: ExecAudit;
  /**
   * Over an anchor (relay.ts): once the command is forked (bwrap's mounts are all made), check that
   * /workspace sits on the anchor; when it does not, the launch is killed and `null` returned.
   */
  readonly checkAnchor?: boolean;
}

/** Starts the process and returns its handle once it runs inside its cgroups. */
export function runSpawn(options: RunSpawnOptions & { checkAnchor?: false }): Promise<SandboxProcess>;
export function runSpawn(options: RunSpawnOptions): Promise<SandboxProcess | null>;
export async function runSpawn(options: RunSpawnOptions): Promise<SandboxProcess | null> {
  const launched = await launchBwrap({ ...options, mode: 'spawn' });
  const { subprocess } = launched;
  const { pid, stdin, stdout, stderr } = subprocess;
  if (pid === undefined || stdin === null || stdout === null || stderr === null) {
    const result = await subprocess;
    throw new InternalError(`could not start bwrap: ${result.shortMessage}`, { cause: result.cause });
  }
  if (options.checkAnchor === true && !(await anchoredOnceForked(launched))) {
    await launched.terminate('kill');
    await subprocess;
    return null;
  }
  // execa resolves (reject: false) when bwrap exits; bwrap exits only after its pid namespace is torn
  // down (the namespace's pid 1 dies with it), so the process tree is gone when this settles.
  const exited = subprocess.then((result) => ({
    exitCode: result.exitCode ?? null,
    signal: result.signal ?? null,
  }));
  return toSandboxProcess({
    pid,
    stdin,
    stdout,
    stderr,
    audit: options.audit,
    exited,
    // Kills the sandbox's pid 1 (the kernel then kills its whole pid namespace) and the outer bwrap.
    terminate: () => launched.terminate('kill'),
  });
}

/** How long a launch may take to fork its command before the anchor check gives up (and keeps it). */
const FORK_WAIT_MS = 5_000;

/**
 * Whether the launched namespace sits on its anchor, asked once bwrap's pid 1 has forked the command:
 * bwrap forks it only after every mount is made. A namespace gone already counts as anchored (the
 * caller then sees the command's end as usual); so does one that never forks in time (logged nowhere:
 * the command is held by its cgroup handshake or the host is very loaded, and a kept launch only misses
 * the next restart).
 */
async function anchoredOnceForked(launched: LaunchedBwrap): Promise<boolean> {
  const pid1 = await launched.pid1.catch(() => null);
  if (pid1 === null) return true;
  const children = `/proc/${String(pid1)}/task/${String(pid1)}/children`;
  const giveUpAt = Date.now() + FORK_WAIT_MS;
  for (;;) {
    const forked = await readFile(children, 'utf8').then(
      (text) => text.trim() !== '',
      () => null,
    );
    if (forked === null) return true;
    if (forked) return sitsOnAnchor(pid1).catch(() => true);
    if (Date.now() > giveUpAt) return true;
    await sleep(1);
  }
}
