// The host's view of a container's cgroups, for the two things `docker exec` cannot do well:
//  - the memory cgroup's OOM-kill counter (docker's State.OOMKilled is per container and sticky: it says
//    nothing about which exec was killed), read before and after each command like runtime-bwrap does;
//  - killing one command's whole session: the container's processes are listed from its cgroup and matched
//    on their session/process-group id *inside the container's pid namespace* (the NSsid/NSpgid lines of
//    /proc/PID/status). This needs no process inside the container, so it works even when the pids limit
//    is exhausted (a fork bomb), where one more `docker exec` would fail.
// Everything here is optional: when the engine is not local (or /proc hides the container), the runtime
// falls back to an in-container kill script and reports no OOM kills.
import { readFile, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { processEnded } from '@agentfense/protocol';

/** A container's cgroups as seen from the host. */
export interface ContainerCgroup {
  /** The memory cgroup's oom_kill counter; null when the memory controller is not visible. */
  oomKills(): Promise<number | null>;
  /**
   * SIGKILLs every process of the container whose session id or process-group id (in the container's pid
   * namespace) is `sessionId`, repeating until none is left. Resolves false if it gave up.
   */
  killSession(sessionId: number): Promise<boolean>;
}

/** One line of /proc/PID/cgroup: `id:controllers:path`. */
interface CgroupLine {
  readonly controllers: readonly string[];
  readonly path: string;
}

/** A cgroup filesystem mount: where it is, which hierarchy root it shows, and its controllers (v1). */
interface CgroupMount {
  readonly version: 1 | 2;
  readonly mountPoint: string;
  readonly root: string;
  readonly controllers: readonly string[];
}

/**
 * How many kill rounds before the container is frozen for the kill (each round kills everything it found;
 * forks are caught next round, unless they outrun the reads).
 */
const KILL_ROUNDS = 50;
/** Frozen kills (freeze, kill, thaw) tried before killSession gives up. */
const FROZEN_ATTEMPTS = 3;
/** How long a freeze may take to settle (a task in uninterruptible sleep delays it) before it is used anyway. */
const FREEZE_SETTLE_MS = 2_000;

/** Parses /proc/PID/cgroup. */
export function parseProcCgroup(text: string): CgroupLine[] {
  const lines: CgroupLine[] = [];
  for (const line of text.split('\n')) {
    const first = line.indexOf(':');
    const second = line.indexOf(':', first + 1);
    if (first < 0 || second < 0) continue;
    const controllers = line.slice(first + 1, second);
    lines.push({
      controllers: controllers === '' ? [] : controllers.split(','),
      path: line.slice(second + 1),
    });
  }
  return lines;
}

/** Parses the cgroup mounts out of /proc/self/mountinfo. */
export function parseCgroupMounts(mountinfo: string): CgroupMount[] {
  const mounts: CgroupMount[] = [];
  for (const line of mountinfo.split('\n')) {
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const fields = line.slice(0, sep).split(' ');
    const [fsType, , superOptions = ''] = line.slice(sep + 3).split(' ');
    const root = unescapeMountPath(fields[3] ?? '');
    const mountPoint = unescapeMountPath(fields[4] ?? '');
    if (fsType === 'cgroup2') mounts.push({ version: 2, mountPoint, root, controllers: [] });
    if (fsType === 'cgroup') {
      mounts.push({ version: 1, mountPoint, root, controllers: superOptions.split(',') });
    }
  }
  return mounts;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/** The host directory of `line`'s cgroup in `mount`, or null if the mount does not show it. */
function hostDir(mount: CgroupMount, path: string): string | null {
  if (mount.root === '/') return posix.join(mount.mountPoint, path);
  if (path === mount.root || path.startsWith(`${mount.root}/`)) {
    return posix.join(mount.mountPoint, path.slice(mount.root.length));
  }
  return null;
}

/** Finds the host directory of the container's cgroup for a v1 controller, or the v2 one. */
function findDir(
  lines: readonly CgroupLine[],
  mounts: readonly CgroupMount[],
  want: { controller: string } | { v2: true },
): string | null {
  for (const line of lines) {
    if ('v2' in want) {
      if (line.controllers.length !== 0) continue;
      for (const mount of mounts) {
        if (mount.version !== 2) continue;
        const dir = hostDir(mount, line.path);
        if (dir !== null) return dir;
      }
    } else if (line.controllers.includes(want.controller)) {
      for (const mount of mounts) {
        if (mount.version !== 1 || !mount.controllers.includes(want.controller)) continue;
        const dir = hostDir(mount, line.path);
        if (dir !== null) return dir;
      }
    }
  }
  return null;
}

/** Reads a file, or null if it does not exist / cannot be read. */
async function readOrNull(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch {
    return null; // absent controller or file: the caller falls back
  }
}

/** The `oom_kill N` counter of memory.oom_control (v1) or memory.events (v2). */
export function parseOomKills(text: string): number | null {
  const match = /^oom_kill (\d+)$/m.exec(text);
  return match === null ? null : Number(match[1]);
}

/** The innermost (container-side) id of an `NSpid:`/`NSsid:`/`NSpgid:` line, and the nesting depth. */
function nsField(status: string, name: string): { id: number; depth: number } | null {
  const match = new RegExp(`^${name}:\\s+([\\d\\s]+)$`, 'm').exec(status);
  if (match === null) return null;
  const ids = (match[1] ?? '').trim().split(/\s+/).map(Number);
  const id = ids[ids.length - 1];
  return id === undefined || Number.isNaN(id) ? null : { id, depth: ids.length };
}

/**
 * Locates the container's cgroups from its init process (host pid, from `docker inspect`). Resolves null
 * when the host cannot see them (remote engine, hidden /proc, a kernel without NSsid).
 */
export async function resolveContainerCgroup(options: {
  initPid: number;
  procRoot?: string;
  /** Unfrozen kill rounds before the frozen kill (tests lower it to reach that path for sure). */
  killRounds?: number;
}): Promise<ContainerCgroup | null> {
  const proc = options.procRoot ?? '/proc';
  const [cgroupText, mountinfo, initStatus] = await Promise.all([
    readOrNull(`${proc}/${options.initPid}/cgroup`),
    readOrNull(`${proc}/self/mountinfo`),
    readOrNull(`${proc}/${options.initPid}/status`),
  ]);
  if (cgroupText === null || mountinfo === null || initStatus === null) return null;
  const initNs = nsField(initStatus, 'NSpid');
  // The container's init must be in a child pid namespace: pid 1 there.
  if (initNs === null || initNs.depth < 2 || initNs.id !== 1 || nsField(initStatus, 'NSsid') === null) {
    return null;
  }
  const lines = parseProcCgroup(cgroupText);
  const mounts = parseCgroupMounts(mountinfo);
  const memoryV1 = findDir(lines, mounts, { controller: 'memory' });
  const v2 = findDir(lines, mounts, { v2: true });
  const oomFile =
    memoryV1 !== null
      ? `${memoryV1}/memory.oom_control`
      : v2 !== null && (await readOrNull(`${v2}/memory.events`)) !== null
        ? `${v2}/memory.events`
        : null;
  // Any hierarchy lists the container's processes; pids/memory are the ones docker always populates.
  const procsDirs = [
    findDir(lines, mounts, { controller: 'pids' }),
    memoryV1,
    findDir(lines, mounts, { controller: 'freezer' }),
    v2,
  ].filter((d): d is string => d !== null);
  let procsFile: string | null = null;
  for (const dir of procsDirs) {
    if ((await readOrNull(`${dir}/cgroup.procs`)) !== null) {
      procsFile = `${dir}/cgroup.procs`;
      break;
    }
  }
  if (procsFile === null) return null;
  const listFile = procsFile;
  const depth = initNs.depth;
  const freezerV1 = findDir(lines, mounts, { controller: 'freezer' });
  const freezer =
    freezerV1 !== null && (await readOrNull(`${freezerV1}/freezer.state`)) !== null
      ? containerFreezer({ file: `${freezerV1}/freezer.state`, frozen: 'FROZEN', thawed: 'THAWED' })
      : v2 !== null && (await readOrNull(`${v2}/cgroup.freeze`)) !== null
        ? containerFreezer({
            file: `${v2}/cgroup.freeze`,
            frozen: '1',
            thawed: '0',
            events: `${v2}/cgroup.events`,
          })
        : null;

  return {
    oomKills: async () => {
      if (oomFile === null) return null;
      const text = await readOrNull(oomFile);
      return text === null ? null : parseOomKills(text);
    },
    killSession: async (sessionId) => {
      // A killed process stays listed until the kernel has finished tearing it down, and cannot fork any
      // more: a round that finds nothing new means the session is dead.
      const killed = new Set<number>();
      const round = (): Promise<number | null> => killRound({ listFile, proc, depth, sessionId, killed });
      for (let n = 0; n < (options.killRounds ?? KILL_ROUNDS); n++) {
        const fresh = await round();
        if (fresh === null || fresh === 0) return true;
      }
      // Still forking after every round (children born between reading cgroup.procs and the kills):
      // freeze the container, so that one round kills every process of the session, then thaw it (frozen
      // processes die once thawed). Without a visible freezer the caller is told that the kill gave up.
      if (freezer === null) return false;
      for (let attempt = 0; attempt < FROZEN_ATTEMPTS; attempt++) {
        // A freezer that cannot be written (the container was just removed) still leaves a plain round.
        await freezer.freeze().catch(() => undefined);
        try {
          if ((await round()) === null) return true;
        } finally {
          await freezer.thaw();
        }
        const fresh = await round();
        if (fresh === null || fresh === 0) return true;
      }
      return false;
    },
  };
}

/**
 * One kill round: SIGKILLs every process of the container whose session or process group (container-side)
 * is `sessionId` and that is not in `killed` yet. Resolves how many it killed, or null if the container
 * is gone (and its processes with it).
 */
async function killRound(o: {
  readonly listFile: string;
  readonly proc: string;
  readonly depth: number;
  readonly sessionId: number;
  readonly killed: Set<number>;
}): Promise<number | null> {
  const text = await readOrNull(o.listFile);
  if (text === null) return null;
  const pids = text.split('\n').filter(Boolean).map(Number);
  let fresh = 0;
  await Promise.all(
    pids.map(async (pid) => {
      if (o.killed.has(pid)) return;
      const status = await readOrNull(`${o.proc}/${pid}/status`);
      if (status === null) return;
      // An ended process cannot fork; a zombie leader whose other threads run on has not ended, and a
      // SIGKILL to its pid ends them all (protocol thread-group.ts).
      if (processEnded(pid, /^State:\s+(\S)/m.exec(status)?.[1] ?? '?', o.proc)) return;
      const sid = nsField(status, 'NSsid');
      const pgid = nsField(status, 'NSpgid');
      // Same pid-namespace depth as the container's init: never a host process whose pid was recycled
      // between reading cgroup.procs and its status.
      if (sid === null || sid.depth !== o.depth) return;
      if (sid.id !== o.sessionId && pgid?.id !== o.sessionId) return;
      fresh += 1;
      o.killed.add(pid);
      try {
        process.kill(pid, 'SIGKILL');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
      }
    }),
  );
  return fresh;
}

/** The container's freezer: v1 freezer.state, or v2 cgroup.freeze (settled when cgroup.events says so). */
function containerFreezer(o: {
  readonly file: string;
  readonly frozen: string;
  readonly thawed: string;
  readonly events?: string;
}): { freeze(): Promise<void>; thaw(): Promise<void> } {
  const settled = async (): Promise<boolean> => {
    if (o.events !== undefined) return /^frozen 1$/m.test((await readOrNull(o.events)) ?? '');
    return ((await readOrNull(o.file)) ?? '').trim() === o.frozen;
  };
  return {
    freeze: async () => {
      await writeFile(o.file, o.frozen);
      // Freezing is asynchronous; a kill before it settled could still miss a fork, never hurt.
      const deadline = Date.now() + FREEZE_SETTLE_MS;
      while (!(await settled()) && Date.now() < deadline) await sleep(1);
    },
    thaw: async () => {
      try {
        await writeFile(o.file, o.thawed);
      } catch (err) {
        // The container is gone, and its cgroup with it: nothing is left frozen.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    },
  };
}
