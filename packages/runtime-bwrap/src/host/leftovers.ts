// What a sandbox's bwrap leaves running when the control plane that launched it is SIGKILLed: bwrap's
// --die-with-parent does not always take the sandbox down (a pid-namespace init may outlive its monitor,
// seen with the nested user namespace of --disable-userns), and no control plane is left to SIGKILL its
// pid 1. Recovery (the next process to open the data directory) calls clearLeftovers(stateDir). It first
// kills and removes the sandbox's own cgroups (cgroups/create.ts removeSandboxCgroups: every process of a
// sandbox joins them before it runs, and every sandbox has a pids limit by default), so no process of
// those is left for this scan to find. This finds the rest by what only they carry: a bwrap whose argv
// names a path inside the sandbox's directory (bwrap started before it read its options from a file
// descriptor), or an orphaned namespace init of the sandbox user. SIGKILL of a namespace's pid 1 makes
// the kernel kill every process in it.
//
// That search reads every process's /proc entries (~150 here, 20-150 ms on a loaded host), and the control
// plane clears leftovers before every start and after every stop. So it runs only when a process of the
// sandbox can exist: runtime.start() writes RUNNING_MARK into stateDir before anything is launched and
// stop() removes it once every process is dead and the cgroups are gone. A state directory that is empty
// or missing (a fresh sandbox, or one stopped cleanly) has nothing to search for; one holding anything
// at all (the mark, a relay record, a scratch directory of an older version that had no mark) is searched.
import { readFile, readdir, readlink, rm } from 'node:fs/promises';
import { posix } from 'node:path';
import { isSameProcess, processStartTime } from '@agentfense/protocol';

/** Present in a sandbox's stateDir while processes of it may exist (see the header). */
export const RUNNING_MARK = 'bwrap-running';

/** The uid the sandbox's processes run as, from the mark (null: none recorded, the shared user's). */
export async function recordedUid(stateDir: string): Promise<number | null> {
  const text = await readFile(posix.join(stateDir, RUNNING_MARK), 'utf8').catch(() => '');
  const uid = Number(text.trim());
  return text.trim() !== '' && Number.isSafeInteger(uid) && uid > 0 ? uid : null;
}

/** False only when `stateDir` is missing or empty: no process of this sandbox was ever left running. */
export async function mayHaveProcesses(stateDir: string): Promise<boolean> {
  try {
    return (await readdir(stateDir)).length > 0;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/**
 * Kills what a sandbox left running (when anything can be) and returns the pids killed. The mark is removed
 * once a search found nothing left: the next clear (e.g. the start that follows a recovery) is then free.
 */
export async function killLeftovers(
  stateDir: string,
  bwrapPath: string,
  /** The sandbox user's host uid (null: sandboxes run as this process's uid). */
  sandboxUid: number | null = null,
): Promise<number[]> {
  if (!(await mayHaveProcesses(stateDir))) return [];
  const killed = await killSandboxProcesses(stateDir, bwrapPath, sandboxUid);
  if (killed.length === 0) await rm(posix.join(stateDir, RUNNING_MARK), { force: true });
  return killed;
}

/**
 * SIGKILLs the bwrap processes of the sandbox whose state directory is `stateDir` that are outside its
 * cgroups (those were emptied just before, see the header); returns their pids.
 */
export async function killSandboxProcesses(
  stateDir: string,
  bwrapPath: string,
  /** The sandbox user's host uid (null: sandboxes run as this process's uid). */
  sandboxUid: number | null = null,
): Promise<number[]> {
  const sandboxDir = posix.dirname(stateDir);
  const inside = `${sandboxDir}/`;
  const killed: number[] = [];
  // An orphaned init is recognised by its uid: only the sandbox user's (as root, an unknown sandbox user
  // means no such search: root's own bwraps are never candidates).
  const me = process.getuid?.() ?? 0;
  const uid = sandboxUid ?? (me === 0 ? null : me);
  for (const name of await readdir('/proc').catch(() => [] as string[])) {
    const pid = Number(name);
    if (!Number.isSafeInteger(pid) || pid <= 1 || pid === process.pid) continue;
    const chosen = processStartTime(pid) ?? null;
    if (chosen === null) continue; // gone (or a zombie)
    // Only bwrap itself (the monitor or the namespace's pid 1): never an unrelated process that happens
    // to mention the path.
    const exe = await readlink(`/proc/${pid}/exe`).catch(() => null);
    if (exe !== bwrapPath) continue;
    const argv = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    const mentions = argv.split('\0').some((arg) => arg.startsWith(inside));
    if (!mentions && (uid === null || !(await isOrphanedNamespaceInit(pid, bwrapPath, uid)))) continue;
    // The pid was chosen from /proc a moment ago: kill it only if it is still that process.
    if (!isSameProcess(pid, chosen)) continue;
    try {
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      // Gone meanwhile.
    }
  }
  return killed;
}

/**
 * True for a sandbox's pid 1 (bwrap inside its own pid namespace) whose monitor — the outer bwrap, its
 * parent while any control plane runs it — is gone. That happens when the control plane is SIGKILLed
 * during a command's start: the monitor dies with it (--die-with-parent), and pid 1, blocked before its
 * cgroup handshake, reads EOF and starts the command outside the sandbox's cgroups, with no parent-death
 * signal armed (the sandbox user's nested user namespace clears it) and no host path in its argv
 * (--args FD). Nothing else can find it; no live control plane owns it, whichever sandbox it was.
 */
async function isOrphanedNamespaceInit(pid: number, bwrapPath: string, uid: number): Promise<boolean> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  // Only a sandbox's: bwrap runs as the sandbox user (never another user's bwrap, e.g. flatpak's).
  if (/^Uid:\s+(\d+)/m.exec(status)?.[1] !== String(uid)) return false;
  const nspid = /^NSpid:\s+(.+)$/m.exec(status)?.[1]?.trim().split(/\s+/) ?? [];
  if (nspid.length < 2 || nspid.at(-1) !== '1') return false;
  const ppid = /^PPid:\s+(\d+)$/m.exec(status)?.[1];
  if (ppid === undefined) return false;
  return (await readlink(`/proc/${ppid}/exe`).catch(() => null)) !== bwrapPath;
}
