// Host checks: is bwrap installed, can it create the namespaces we use, is FUSE available. Each failure
// says what is missing and how to fix it.
import { stat } from 'node:fs/promises';
import { UnavailableError, findExecutable } from '@agentfense/protocol';

/** How long the probe sandbox may take; it normally takes ~6 ms. */
const PROBE_TIMEOUT_MS = 10_000;

/** Finds an executable bwrap: the configured path, else PATH, else the usual system directories. */
export async function resolveBwrapPath(configured: string | undefined): Promise<string> {
  const found = await findExecutable({ name: 'bwrap', configured });
  if (found !== null) return found;
  throw new UnavailableError(
    `bubblewrap is not installed (no executable ${configured ?? 'bwrap on PATH'}): install it with \`apt-get install bubblewrap\``,
  );
}

/**
 * Runs `true` in a sandbox with the namespaces every command uses, as the sandbox user (so an
 * unprivileged user namespace must be allowed); throws UnavailableError if that fails.
 */
export async function probeBwrap(
  bwrapPath: string,
  identity: { uid: number; gid: number; name: string } | null = null,
): Promise<void> {
  // Loaded only when a probe runs (rarely: its success is cached per host state); execa is ~50 ms to load.
  const { execa } = await import('execa');
  const result = await execa(
    bwrapPath,
    [
      '--unshare-user',
      '--uid',
      '1000',
      '--gid',
      '1000',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-net',
      '--ro-bind',
      '/',
      '/',
      '--proc',
      '/proc',
      '--dev',
      '/dev',
      '--',
      'true',
    ],
    {
      reject: false,
      env: {},
      extendEnv: false,
      stdin: 'ignore',
      cwd: '/',
      timeout: PROBE_TIMEOUT_MS,
      ...(identity === null ? {} : { uid: identity.uid, gid: identity.gid }),
    },
  );
  if (result.exitCode === 0) return;
  const detail = result.stderr.trim() || result.shortMessage;
  const who = identity === null ? 'this user' : `the unprivileged sandbox user ${identity.name}`;
  throw new UnavailableError(
    `bubblewrap cannot create a sandbox as ${who} here (${detail}). Unprivileged user namespaces must ` +
      'be allowed: check `sysctl user.max_user_namespaces` (> 0), on Debian ' +
      '`sysctl kernel.unprivileged_userns_clone=1`, on Ubuntu 24.04+ ' +
      '`sysctl kernel.apparmor_restrict_unprivileged_userns=0` (or an AppArmor profile for bwrap); ' +
      'inside a container, run it with seccomp/AppArmor profiles that allow unshare(CLONE_NEWUSER).',
    { details: { exitCode: result.exitCode ?? null } },
  );
}

/** Throws UnavailableError unless /dev/fuse exists as a character device. */
export async function checkFuseDevice(path = '/dev/fuse'): Promise<void> {
  const info = await stat(path).catch((err: unknown) => {
    throw new UnavailableError(
      `${path} is missing (${(err as Error).message}): load the module with \`modprobe fuse\` and install ` +
        '`apt-get install fuse3` (or libfuse2); in a container, pass `--device /dev/fuse`',
      { cause: err },
    );
  });
  if (!info.isCharacterDevice()) throw new UnavailableError(`${path} is not a character device`);
}
