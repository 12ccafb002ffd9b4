// The sandbox's /etc: a small directory prepared once per runtime and process (runtime.ts) and bound read-only
// as a whole. It holds copies of the few host /etc entries programs need (symlinks kept as symlinks) and
// our own passwd, group and hosts, which name the sandbox user and reveal none of the host's users or
// host names.
//
// Why one prepared directory instead of one bind per entry: every bind costs bwrap a mount, a read-only
// remount and a scan of /proc/self/mountinfo; ~20 /etc binds measured +8-10 ms on a ~6 ms `true`.
import { constants } from 'node:fs';
import { copyFile, lstat, mkdir, readdir, readlink, symlink, writeFile } from 'node:fs/promises';
import { InternalError } from '@agentfense/protocol';
import { posix } from 'node:path';
import type { RuntimeLogger } from '../logger.js';
import { SANDBOX_GID, SANDBOX_HOME, SANDBOX_HOSTNAME, SANDBOX_UID } from '../exec/args.js';

/**
 * The parts of the host's /etc that programs need, relative to /etc, and nothing else. /etc as a whole is
 * not exposed: it holds credentials and host configuration a sandbox has no business reading (npmrc /
 * pip.conf / gitconfig tokens, ssh host keys, /etc/environment, TLS private keys in /etc/ssl/private, the
 * real passwd with the host's users; shadow is root:shadow 0640 and unreadable to uid 1000 anyway, but we
 * do not rely on that). Entries missing on the host are skipped.
 */
export const DEFAULT_ETC_ENTRIES: readonly string[] = [
  'alternatives', // Debian's update-alternatives symlinks (awk, editor, ...)
  'ld.so.cache', // the dynamic linker's cache: without it every exec searches all lib dirs
  'ld.so.conf',
  'ld.so.conf.d',
  'ssl/certs', // CA certificates for TLS when the network is on (symlinks into /usr/share)
  'ssl/openssl.cnf',
  'ca-certificates.conf',
  'nsswitch.conf', // so getpwuid() and getaddrinfo() consult the files we provide
  'host.conf',
  'gai.conf',
  'protocols',
  'services',
  'localtime',
  'mime.types',
  'os-release',
  'debian_version',
  'profile', // login shells
  'bash.bashrc',
  'inputrc',
];

/** The files we write ourselves (they replace any host copy). */
export function generatedEtcContents(): Readonly<Record<string, string>> {
  return {
    passwd:
      'root:x:0:0:root:/root:/usr/sbin/nologin\n' +
      `agent:x:${SANDBOX_UID}:${SANDBOX_GID}:AgentFense sandbox user:${SANDBOX_HOME}:/bin/sh\n` +
      'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n',
    group: `root:x:0:\nagent:x:${SANDBOX_GID}:\nnogroup:x:65534:\n`,
    hosts: `127.0.0.1\tlocalhost ${SANDBOX_HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n`,
    // The sandbox's DNS is its policy point's (packages/network), on its own loopback; with no network
    // policy nothing listens there and a lookup fails at once. The host's resolvers are never reachable.
    'resolv.conf': 'nameserver 127.0.0.1\noptions edns0\n',
  };
}

export interface PrepareEtcOptions {
  /** Directory to fill (created; must not exist or be empty). */
  readonly dir: string;
  /** Host /etc entries to copy, relative to `hostEtc`; default DEFAULT_ETC_ENTRIES. */
  readonly entries?: readonly string[];
  /** The host's /etc (tests point it elsewhere). */
  readonly hostEtc?: string;
  readonly logger: RuntimeLogger;
}

/**
 * Builds the sandbox's /etc in `dir`: host entries copied (world-readable), generated files written.
 * Runs as root, so it never writes through a symlink: copied symlinks could point anywhere on the host.
 * Every write creates a new name (O_EXCL, mkdir, symlink), and no write goes below a symlinked directory.
 */
export async function prepareSandboxEtc(options: PrepareEtcOptions): Promise<void> {
  const hostEtc = options.hostEtc ?? '/etc';
  const generated = generatedEtcContents();
  await mkdir(options.dir, { recursive: true, mode: 0o755 });
  for (const entry of options.entries ?? DEFAULT_ETC_ENTRIES) {
    const parts = entry.split('/');
    if (entry.startsWith('/') || parts.some((p) => p === '' || p === '.' || p === '..')) {
      options.logger.warn({ entry }, 'ignoring an /etc entry that is not a plain relative path');
      continue;
    }
    // Our own passwd/group/hosts win; the host's are never copied.
    if (parts[0] !== undefined && parts[0] in generated) continue;
    let parent = options.dir;
    for (const part of parts.slice(0, -1)) {
      parent = posix.join(parent, part);
      await mkdir(parent, { mode: 0o755 }).catch((err: unknown) => {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      });
      if ((await lstat(parent)).isSymbolicLink())
        throw new InternalError(`refusing to copy ${entry} below a symlink`);
    }
    await copyEntry(posix.join(hostEtc, entry), posix.join(options.dir, entry), options.logger);
  }
  for (const [name, content] of Object.entries(generated)) {
    await writeFile(posix.join(options.dir, name), content, { mode: 0o644, flag: 'wx' });
  }
}

/** Copies a file, a symlink (verbatim, not followed) or a directory tree; skips what does not exist. */
async function copyEntry(source: string, dest: string, logger: RuntimeLogger): Promise<void> {
  const info = await lstat(source).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  });
  if (info === null) return;
  if (info.isSymbolicLink()) {
    await symlink(await readlink(source), dest);
  } else if (info.isDirectory()) {
    await mkdir(dest, { mode: 0o755 });
    for (const name of await readdir(source))
      await copyEntry(posix.join(source, name), posix.join(dest, name), logger);
  } else if (info.isFile()) {
    // Only world-readable files: a root-only file (a key, a token) never becomes visible by being copied.
    if ((info.mode & 0o004) === 0) {
      logger.debug({ source }, 'not copying a host /etc file that is not world-readable');
      return;
    }
    await copyFile(source, dest, constants.COPYFILE_EXCL);
  }
}
