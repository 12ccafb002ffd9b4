// Finding the host binaries the runtimes drive (bwrap, docker, dockerd) the one same way: the configured
// path when given, else each absolute PATH directory, else the usual system directories (a service started
// with a bare PATH still finds Debian's packages).
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { posix } from 'node:path';

/** Where Debian installs user binaries; the fallback after PATH. */
export const SYSTEM_BIN_DIRS: readonly string[] = ['/usr/bin', '/usr/local/bin', '/bin'];

export interface FindExecutableOptions {
  /** The binary's name, e.g. 'bwrap'. */
  readonly name: string;
  /** A path the user configured: the only candidate when given. */
  readonly configured?: string | undefined;
  /** Tried after PATH (default SYSTEM_BIN_DIRS). */
  readonly fallbackDirs?: readonly string[];
}

/** The first executable candidate, or null (the caller says how to install it). */
export async function findExecutable(options: FindExecutableOptions): Promise<string | null> {
  const fallback = options.fallbackDirs ?? SYSTEM_BIN_DIRS;
  const candidates =
    options.configured !== undefined
      ? [options.configured]
      : [...(process.env['PATH'] ?? '').split(':').filter((d) => d.startsWith('/')), ...fallback].map((d) =>
          posix.join(d, options.name),
        );
  for (const candidate of candidates) {
    const ok = await access(candidate, constants.X_OK).then(
      () => true,
      () => false,
    );
    if (ok) return candidate;
  }
  return null;
}
