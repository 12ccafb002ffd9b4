// Host-side mount bookkeeping for FUSE mountpoints: is something mounted there, and clearing a dead or
// hung mount. Never stat()s the mountpoint: a hung FUSE daemon would block that call forever
// (a stopped worker blocks every access, even a stat of the mountpoint).
import { execFile } from 'node:child_process';
import { access, mkdir, readFile, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Where the kernel's fusectl filesystem exposes each FUSE connection (`<minor>/abort`). */
const FUSECTL_DIR = '/sys/fs/fuse/connections';

/** One line of /proc/self/mountinfo that matters here. */
export interface MountInfo {
  readonly mountpoint: string;
  /** Device minor: the fusectl connection number of a FUSE mount. */
  readonly minor: number;
  readonly fsType: string;
  readonly source: string;
}

/** Mountinfo escapes space, tab, newline and backslash as \ooo. */
function unescapeMountinfo(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** Every mount of this mount namespace, innermost last (read from /proc/self/mountinfo). */
export async function listMounts(): Promise<MountInfo[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  const out: MountInfo[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const [left, right] = line.split(' - ');
    if (left === undefined || right === undefined) continue;
    const fields = left.split(' ');
    const [fsType = '', source = ''] = right.split(' ');
    const minor = Number((fields[2] ?? '0:0').split(':')[1]);
    out.push({ mountpoint: unescapeMountinfo(fields[4] ?? ''), minor, fsType, source });
  }
  return out;
}

/** The FUSE mounts at exactly `mountpoint` (more than one when mounts were stacked). */
export async function fuseMountsAt(mountpoint: string): Promise<MountInfo[]> {
  return (await listMounts()).filter((m) => m.mountpoint === mountpoint && m.fsType.startsWith('fuse'));
}

/** True when a FUSE filesystem is mounted at `mountpoint`. */
export async function isFuseMounted(mountpoint: string): Promise<boolean> {
  return (await fuseMountsAt(mountpoint)).length > 0;
}

async function ensureFusectl(): Promise<boolean> {
  try {
    await access(`${FUSECTL_DIR}`);
    if ((await listMounts()).some((m) => m.fsType === 'fusectl')) return true;
    await mkdir(FUSECTL_DIR, { recursive: true });
    await run('mount', ['-t', 'fusectl', 'fusectl', FUSECTL_DIR]);
    return true;
  } catch {
    return false;
  }
}

/**
 * Aborts the kernel connection of a FUSE mount (fusectl `<minor>/abort`): every pending and later request
 * fails with ENOTCONN, and a daemon blocked on a lazily detached but still busy mount can finish. Returns
 * false when there was nothing to abort.
 */
export async function abortFuseConnection(minor: number): Promise<boolean> {
  if (!(await ensureFusectl())) return false;
  return writeFile(`${FUSECTL_DIR}/${minor}/abort`, '1').then(
    () => true,
    () => false,
  );
}

/**
 * Clears every FUSE mount at `mountpoint`, whatever state its daemon is in: aborts the kernel connection
 * first (a hung daemon would otherwise block the unmount's own path lookups), then detaches the mount
 * lazily. Returns how many mounts were cleared. Safe to call when nothing is mounted.
 */
export async function clearFuseMount(mountpoint: string): Promise<number> {
  let cleared = 0;
  for (let round = 0; round < 8; round++) {
    const mounts = await fuseMountsAt(mountpoint);
    const top = mounts.at(-1);
    if (top === undefined) return cleared;
    if (await ensureFusectl()) {
      // ENOENT: the connection is already gone (daemon dead); nothing to abort.
      await writeFile(`${FUSECTL_DIR}/${top.minor}/abort`, '1').catch(() => undefined);
    }
    try {
      await run('umount', ['-l', '--', mountpoint]);
    } catch {
      await run('fusermount', ['-uz', '--', mountpoint]).catch(() => undefined);
    }
    cleared++;
  }
  throw new Error(`could not clear the FUSE mounts at ${mountpoint}`);
}
