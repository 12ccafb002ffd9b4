// `agentfense mount <dir> <mountpoint>`: serves the permission view of a directory in the foreground until
// SIGINT/SIGTERM, which unmount cleanly (contract §7). Useful to look at what an agent would see, or to hand
// the view to another tool. Without --delta, changes go to a temporary delta removed at exit.
import { mkdtemp, readdir, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { InvalidArgumentError, UnavailableError, WorkerExitedError } from '@agentfense/protocol/core';
import type { CliContext } from '../io.js';
import { parseByteSize } from '../parse.js';
import { addPolicyOptions, policyFromFlags } from '../policy-options.js';
import { untilSignal } from '../signals.js';
import type { PolicyFlags } from '../policy-options.js';

interface MountFlags extends PolicyFlags {
  readonly delta?: string;
  readonly log?: string;
  readonly allowOther?: boolean;
  readonly audit?: boolean;
  readonly disk?: string;
}

/** How often the foreground mount checks that it is still mounted (mountinfo only, never a stat). */
const MOUNT_CHECK_INTERVAL_MS = 500;

/**
 * Resolves once `target` is no longer a FUSE mount (someone ran `umount -l` or `fusermount -u` on it):
 * the worker may keep running on a detached mount, so only the mount table tells. dispose() stops it.
 */
function whenUnmounted(
  target: string,
  isFuseMounted: (path: string) => Promise<boolean>,
): { promise: Promise<'unmounted'>; dispose(): void } {
  let timer: NodeJS.Timeout | undefined;
  const promise = new Promise<'unmounted'>((done) => {
    const check = (): void => {
      isFuseMounted(target).then(
        (mounted) => {
          if (!mounted) done('unmounted');
          else timer = setTimeout(check, MOUNT_CHECK_INTERVAL_MS);
        },
        () => (timer = setTimeout(check, MOUNT_CHECK_INTERVAL_MS)),
      );
    };
    timer = setTimeout(check, MOUNT_CHECK_INTERVAL_MS);
  });
  return { promise, dispose: () => clearTimeout(timer) };
}

async function requireDir(path: string, what: string): Promise<void> {
  const info = await stat(path).catch(() => null);
  if (info === null) throw new InvalidArgumentError(`${what} ${path} does not exist`);
  if (!info.isDirectory()) throw new InvalidArgumentError(`${what} ${path} is not a directory`);
}

/** Registers `mount` on the program. */
export function registerMount(program: Command, { io, result }: CliContext): void {
  addPolicyOptions(
    program
      .command('mount')
      .description('serve the permission view of <dir> at <mountpoint> until Ctrl-C (SIGINT/SIGTERM unmount)')
      .argument('<dir>', 'the codebase directory (read-only lower layer; never modified)')
      .argument('<mountpoint>', 'an existing empty directory'),
  )
    .option(
      '--delta <dir>',
      'keep changes in this directory across runs (default: a temporary one, removed at exit)',
    )
    .option('--log <file>', "the worker's JSON log file (default: a file in the temporary directory)")
    .option('--allow-other', 'let other users use the mount (needs user_allow_other for non-root)')
    .option('--disk <size>', 'cap what the delta may hold (e.g. 2G); writes past it fail with ENOSPC')
    .option('--audit', 'print every access decision (denials and allowed accesses) to stderr as JSON lines')
    .action(async (dir: string, mountpoint: string, flags: MountFlags) => {
      const { isFuseMounted, spawnWorker } = await import('@agentfense/fuse-worker');
      const lowerDir = resolve(dir);
      const target = resolve(mountpoint);
      const rules = await policyFromFlags(flags);
      const diskQuotaBytes = flags.disk === undefined ? undefined : parseByteSize(flags.disk, '--disk');
      await requireDir(lowerDir, 'codebase directory');
      // The worker walks the codebase's path without following any symlink: give it the real one.
      const realLower = await realpath(lowerDir);
      await requireDir(target, 'mountpoint');
      if (await isFuseMounted(target)) throw new InvalidArgumentError(`${target} is already a FUSE mount`);
      if ((await readdir(target)).length > 0)
        throw new InvalidArgumentError(`mountpoint ${target} is not empty`);

      const scratch = await mkdtemp(join(tmpdir(), 'agentfense-mount-'));
      const deltaDir = flags.delta === undefined ? join(scratch, 'delta') : resolve(flags.delta);
      const logFile = flags.log === undefined ? join(scratch, 'worker.log') : resolve(flags.log);
      const signal = untilSignal();
      const worker = await spawnWorker({ logFile, name: 'mount' });
      let watch: { promise: Promise<'unmounted'>; dispose(): void } | undefined;
      try {
        if (flags.audit === true) {
          worker.client.onEvent('audit', (events) => {
            for (const event of events) io.stderr.write(`${JSON.stringify(event)}\n`);
          });
        }
        await worker.mount({
          lowerDir: realLower,
          deltaDir,
          mountpoint: target,
          rules,
          allowOther: flags.allowOther === true,
          auditAllowed: flags.audit === true,
          ...(diskQuotaBytes === undefined ? {} : { diskQuotaBytes }),
        });
        io.stderr.write(
          `agentfense: ${lowerDir} mounted at ${target} (delta ${deltaDir}, log ${logFile}); Ctrl-C unmounts\n`,
        );
        watch = whenUnmounted(target, isFuseMounted);
        const ended = await Promise.race([
          signal.promise,
          worker.exited.then(() => 'worker-exit'),
          watch.promise,
        ]);
        if (ended === 'unmounted') {
          throw new UnavailableError(
            `${target} was unmounted from outside (umount or fusermount -u by someone else); the view is gone, stopping`,
          );
        }
        if (ended === 'worker-exit') {
          throw new WorkerExitedError(
            `the worker exited unexpectedly: ${worker.stderrTail.trim() || 'no output'}`,
          );
        }
        io.stderr.write(`agentfense: ${ended}: unmounting ${target}\n`);
      } finally {
        signal.dispose();
        watch?.dispose();
        await worker.stop();
        if (flags.delta === undefined) await rm(scratch, { recursive: true, force: true });
      }
      result.exitCode = 0;
    });
}
