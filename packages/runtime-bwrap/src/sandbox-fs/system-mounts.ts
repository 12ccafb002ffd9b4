// Which parts of the host system a sandbox sees (read-only), resolved once per runtime from the host's
// layout, so the per-exec argv builder stays pure and does no I/O.
import { lstat, readlink } from 'node:fs/promises';
import type { SystemMount } from '../exec/args.js';

/** Debian's system directories; on merged-usr hosts /bin, /lib, /lib64 and /sbin are symlinks into /usr. */
export const DEFAULT_SYSTEM_DIRS: readonly string[] = ['/usr', '/bin', '/lib', '/lib64', '/sbin'];

export interface ResolveSystemMountsOptions {
  /** Top-level system directories (a symlink stays a symlink inside, a directory is bound read-only). */
  readonly systemDirs?: readonly string[];
  /** The prepared /etc directory (etc-files.ts), bound read-only at /etc. */
  readonly etcDir: string;
}

/** Resolves the read-only system view for this host, in mount order (see args.ts ordering rules). */
export async function resolveSystemMounts(options: ResolveSystemMountsOptions): Promise<SystemMount[]> {
  const mounts: SystemMount[] = [];
  for (const dir of options.systemDirs ?? DEFAULT_SYSTEM_DIRS) {
    const stat = await lstat(dir).catch((err: unknown) => {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null; // e.g. no /lib64 on this arch
      throw err;
    });
    if (stat === null) continue;
    if (stat.isSymbolicLink()) {
      // Keep merged-usr symlinks as symlinks: binding them would duplicate /usr/bin as a second mount.
      mounts.push({ kind: 'symlink', target: await readlink(dir), dest: dir });
    } else {
      mounts.push({ kind: 'ro-bind', source: dir, dest: dir });
    }
  }
  // A prepared directory (copies of a few host entries plus our passwd/group/hosts), never the host's /etc.
  mounts.push({ kind: 'ro-bind', source: options.etcDir, dest: '/etc' });
  return mounts;
}
