// What the bwrap runtime prepares about the host, kept across processes: a one-shot
// `agentfense run` is a new process each time, and probing bwrap (a sandbox of its own) and copying the
// sandbox /etc (~300 entries) took most of its start. Both now live in the data directory's private
// `run/` and are reused while the host stays the same:
//   - the bwrap probe's success, keyed on the bwrap binary (inode, size, times), the kernel boot id and
//     release, and the user-namespace sysctls: a reboot, an upgrade or a sysctl change probes again;
//   - the prepared /etc, in a directory named by a fingerprint of everything it was copied from (every
//     host entry walked with lstat: inode, size, mode, mtime, ctime; the generated files' contents): any
//     change to a copied host file makes a new directory. Processes mark the directory they use
//     (`<dir>.<pid>`, removed at exit), and a directory no live process marks and that is not current is
//     removed the next time one is prepared.
// Only a private directory (the data directory's run/, 0700 root) holds them: never a shared /tmp.
import { createHash } from 'node:crypto';
import { lstatSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';

/** Prefix of prepared /etc directories in run/ (`etc-cache-<fingerprint>`). */
export const ETC_CACHE_PREFIX = 'etc-cache-';
/** Prefix of an /etc directory being prepared (renamed into place when complete). */
const ETC_BUILD_PREFIX = 'etc-build-';
/** The probe result file in run/. */
const PROBE_FILE = 'bwrap-probe.json';

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return fallback;
  }
}

/** What invalidates a successful bwrap probe: the binary, the boot, the kernel, the userns sysctls, /dev/fuse. */
export function probeKey(bwrapPath: string): string {
  const bin = statSync(bwrapPath);
  let fuse = 'absent';
  try {
    fuse = String(statSync('/dev/fuse').rdev);
  } catch {
    // Checked (and reported) by checkFuseDevice; here it only changes the key.
  }
  return JSON.stringify([
    bwrapPath,
    bin.ino,
    bin.size,
    bin.mtimeMs,
    bin.ctimeMs,
    bin.mode,
    readOr('/proc/sys/kernel/random/boot_id', ''),
    readOr('/proc/sys/kernel/osrelease', ''),
    readOr('/proc/sys/user/max_user_namespaces', ''),
    readOr('/proc/sys/kernel/unprivileged_userns_clone', ''),
    fuse,
  ]);
}

/** True when a probe with this key succeeded before (on this boot, with this binary and these sysctls). */
export async function probeCached(runDir: string, key: string): Promise<boolean> {
  const text = await readFile(posix.join(runDir, PROBE_FILE), 'utf8').catch(() => null);
  if (text === null) return false;
  try {
    return (JSON.parse(text) as { key?: unknown }).key === key;
  } catch {
    return false;
  }
}

/** Records a successful probe (written to a temporary name and renamed: readers never see half a file). */
export async function recordProbe(runDir: string, key: string): Promise<void> {
  const temp = posix.join(runDir, `${PROBE_FILE}.${process.pid}`);
  await writeFile(temp, JSON.stringify({ key }), { mode: 0o600 });
  await rename(temp, posix.join(runDir, PROBE_FILE));
}

/**
 * Fingerprint of the sandbox /etc that `entries` of `hostEtc` plus `generated` would produce: every path
 * walked the way prepareSandboxEtc copies it (lstat, symlinks not followed), with what changes when the
 * content does (inode, size, mode, mtime, ctime).
 */
export function etcFingerprint(
  hostEtc: string,
  entries: readonly string[],
  generated: Readonly<Record<string, string>>,
): string {
  const hash = createHash('sha256');
  hash.update(JSON.stringify([hostEtc, entries, generated]));
  const walk = (path: string): void => {
    let info;
    try {
      info = lstatSync(path, { bigint: true });
    } catch {
      hash.update(`${path}\0absent\n`);
      return;
    }
    hash.update(`${path}\0${info.ino}\0${info.size}\0${info.mode}\0${info.mtimeNs}\0${info.ctimeNs}\n`);
    if (info.isDirectory()) for (const name of readdirSync(path).sort()) walk(posix.join(path, name));
  };
  for (const entry of entries) walk(posix.join(hostEtc, entry));
  return hash.digest('hex').slice(0, 32);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Marks of this process (removed at exit, synchronously: 'exit' allows nothing else). */
const marks = new Set<string>();
let exitHook = false;

/**
 * The prepared /etc for `fingerprint` in `runDir`, built with `build(dir)` when missing. Returns the
 * directory to bind at /etc. Several processes may race: each builds in its own temporary directory and
 * renames it into place; the loser removes its copy and uses the winner's.
 */
export async function cachedEtc(options: {
  runDir: string;
  fingerprint: string;
  build: (etcDir: string) => Promise<void>;
}): Promise<string> {
  const { runDir, fingerprint } = options;
  await mkdir(runDir, { recursive: true, mode: 0o700 });
  const name = `${ETC_CACHE_PREFIX}${fingerprint}`;
  const final = posix.join(runDir, name);
  // Mark first, so a concurrent clean-up never removes the directory between our check and our use.
  const mark = `${final}.${process.pid}`;
  await writeFile(mark, '', { mode: 0o600 });
  marks.add(mark);
  if (!exitHook) {
    exitHook = true;
    process.once('exit', () => {
      for (const m of marks) rmSync(m, { force: true });
    });
  }
  const ready = await readdir(posix.join(final, 'etc')).then(
    () => true,
    () => false,
  );
  if (!ready) {
    const temp = await mkdtemp(posix.join(runDir, `${ETC_BUILD_PREFIX}${process.pid}-`));
    try {
      await chmod(temp, 0o755);
      await options.build(posix.join(temp, 'etc'));
      await rename(temp, final).catch(async (err: unknown) => {
        const code = (err as NodeJS.ErrnoException).code;
        // Another process renamed its complete copy into place first: use that one.
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
        await rm(temp, { recursive: true, force: true });
      });
    } catch (err) {
      await rm(temp, { recursive: true, force: true });
      throw err;
    }
  }
  await removeUnused(runDir, name);
  return posix.join(final, 'etc');
}

/**
 * Removes prepared /etc directories that are not `current` and that no live process marks, half-built
 * ones of dead processes, and dead processes' marks. Also the per-process directories of older versions
 * (`bwrap-etc-<pid>-…`) whose process is gone.
 */
async function removeUnused(runDir: string, current: string): Promise<void> {
  const names = await readdir(runDir).catch(() => [] as string[]);
  const inUse = new Set<string>();
  for (const name of names) {
    const dot = name.lastIndexOf('.');
    if (!name.startsWith(ETC_CACHE_PREFIX) || dot < 0) continue;
    const pid = Number(name.slice(dot + 1));
    if (!Number.isSafeInteger(pid) || pid <= 0) continue;
    if (pid === process.pid || isAlive(pid)) inUse.add(name.slice(0, dot));
    else await rm(posix.join(runDir, name), { force: true });
  }
  for (const name of names) {
    const path = posix.join(runDir, name);
    if (name.startsWith(ETC_CACHE_PREFIX) && !name.includes('.') && name !== current && !inUse.has(name)) {
      await rm(path, { recursive: true, force: true });
    } else if (name.startsWith(ETC_BUILD_PREFIX) || name.startsWith('bwrap-etc-')) {
      const prefix = name.startsWith(ETC_BUILD_PREFIX) ? ETC_BUILD_PREFIX : 'bwrap-etc-';
      const pid = Number(name.slice(prefix.length).split('-')[0]);
      if (Number.isSafeInteger(pid) && pid > 0 && pid !== process.pid && !isAlive(pid)) {
        await rm(path, { recursive: true, force: true });
      }
    }
  }
}
