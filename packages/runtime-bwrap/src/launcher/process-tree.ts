// The host's view of a launcher's pid namespace, to kill what a command left behind.
//
// With a per-exec bwrap, a command's end was its pid namespace's end: whatever it started died with it.
// Commands run through the launcher share one namespace (launcher.ts), so the host kills their leftovers
// itself, from /proc, never trusting anything af-init says. This works because af-init is the namespace's
// pid 1 (`--as-pid-1`) and a child subreaper: every process of the namespace is in af-init's tree, and a
// process whose parent died is re-parented to af-init. So af-init's direct children are either a live
// command's root, or a live command's orphan (still in that command's session), or a leftover: an orphan
// of a command that ended, or one that left its session (setsid) after its parent died. Leftovers and
// their whole subtrees are killed, as is the whole subtree of a command being terminated.
//
// Tree passes can miss a process while the tree changes under them (the kernel's children file skips
// entries then), so a sweep ends with a scan of the whole namespace (by session).
//
// Limitation (docs/decisions.md, "What a command leaves behind is killed from the host's view of the
// sandbox"): a daemon of a still-running command that both left its session and lost its parent cannot be
// told from a leftover; it is killed when any command of the sandbox ends.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { isSameProcess, processEnded } from '@agentfense/protocol';

/** How long one sweep keeps killing before it gives up (a process that cannot be killed is a kernel matter). */
const SWEEP_DEADLINE_MS = 5_000;

/** Host pids of `pid`'s children, over all its threads (a child forked by a thread is listed under it). */
function childrenOf(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${String(pid)}/task`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const task of tasks) {
    let text: string;
    try {
      text = readFileSync(`/proc/${String(pid)}/task/${task}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const word of text.split(' ')) if (word !== '' && word !== '\n') out.push(Number(word));
  }
  return out;
}

/**
 * Whether a process has ended (all its threads exited: its parent has only to reap it) and its session id
 * in the innermost pid namespace; null once it is gone. A leader that exited alone shows "Z" while its
 * other threads run on: that process has not ended (protocol thread-group.ts).
 */
function statusOf(pid: number): ProcessStatus | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${String(pid)}/status`, 'utf8');
  } catch {
    return null;
  }
  const state = /^State:\s+(\S)/m.exec(text)?.[1] ?? '?';
  const sids = /^NSsid:\s+([\d\s]+?)\s*$/m.exec(text)?.[1]?.split(/\s+/);
  const sid = Number(sids?.[sids.length - 1] ?? Number.NaN);
  return { ended: processEnded(pid, state), sid };
}

/** Every process of the host: /proc's listing, by pid number, misses no process that lives through it. */
function allPids(): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    const first = name.charCodeAt(0);
    if (first >= 48 && first <= 57) out.push(Number(name));
  }
  return out;
}

/** Of `candidates`, those in `pid`'s pid namespace, `pid` excepted. */
function inNamespaceOf(pid: number, candidates: readonly number[]): number[] {
  let ns: number;
  try {
    ns = statSync(`/proc/${String(pid)}/ns/pid`).ino;
  } catch {
    return [];
  }
  return candidates.filter((other) => {
    if (other === pid) return false;
    try {
      return statSync(`/proc/${String(other)}/ns/pid`).ino === ns;
    } catch {
      return false; // gone
    }
  });
}

/** `pid` and all its descendants (host pids). */
function subtree(pid: number, view: ProcessView): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) out.push(...view.children(out[i] as number));
  return out;
}

function kill(pid: number): boolean {
  try {
    process.kill(pid, 'SIGKILL');
    return true;
  } catch {
    return false; // gone already
  }
}

/** What a sweep needs to know of one process. */
export interface ProcessStatus {
  /** Every thread of it exited (a zombie waiting to be reaped): it can neither run nor fork again. */
  readonly ended: boolean;
  /** Its session id in the innermost pid namespace. */
  readonly sid: number;
}

/** What a sweep reads of the host's processes and does to them (the host's /proc; tests give their own). */
export interface ProcessView {
  /** Host pids of a process's children. */
  children(pid: number): number[];
  /** Whether it ended, and its session id in the innermost pid namespace; null once it is gone. */
  status(pid: number): ProcessStatus | null;
  /** SIGKILL; false if the process was gone. */
  kill(pid: number): boolean;
  /** Whether `pid` is still the process that started at `startTime`. */
  same(pid: number, startTime: string | null): boolean;
  /**
   * Host pids of every other process in `pid`'s pid namespace. Complete, where `children` is not: the
   * kernel's children file can skip an entry while the list changes under the read (a child exiting or
   * reaped), which is exactly when a sweep runs.
   */
  namespaceMembers(pid: number): number[];
}

/**
 * The host's /proc. `candidatesFile` lists a superset of the namespace's processes completely, one pid per
 * line (the sandbox's `cgroup.procs`: a few pids); without it, or when it cannot be read, every process of
 * the host is looked at (~0.7 ms for 66 processes).
 */
export function hostProcessView(candidatesFile?: string): ProcessView {
  const candidates = (): number[] => {
    if (candidatesFile === undefined) return allPids();
    try {
      return readFileSync(candidatesFile, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map(Number);
    } catch {
      return allPids();
    }
  };
  return {
    children: childrenOf,
    status: statusOf,
    kill,
    same: isSameProcess,
    namespaceMembers: (pid) => inNamespaceOf(pid, candidates()),
  };
}

const HOST = hostProcessView();

/**
 * Whether a process in session `sid` may live on: it is a live command's, or in af-init's own session 1,
 * which a command's process has only between its fork and its setsid().
 */
function spared(sid: number, live: ReadonlySet<number>): boolean {
  return live.has(sid) || sid === 1;
}

/**
 * One pass; returns how many live (not ended) processes it signalled, plus how many of af-init's children
 * it found dead or dying. Synchronous: no command starts in between.
 */
function sweepOnce(
  init: { pid: number; startTime: string | null },
  live: ReadonlySet<number>,
  view: ProcessView,
): number {
  let changed = 0;
  for (const child of view.children(init.pid)) {
    const status = view.status(child);
    if (status === null || status.ended) {
      // It died after af-init's children were listed (a command's root killed by its group's SIGKILL, which
      // races the sweep): its own children are af-init's now, and were not in that listing. The next pass
      // sees them; ending here left a command's setsid'd child alive (a flaky runtime test caught it).
      changed++;
      continue;
    }
    // A live command or its orphan (killed when that command ends).
    if (spared(status.sid, live)) continue;
    for (const pid of subtree(child, view)) {
      const s = view.status(pid);
      if (s !== null && !s.ended && view.kill(pid)) changed++;
    }
  }
  return changed;
}

/**
 * One pass over the whole namespace (ProcessView.namespaceMembers), by session alone: every process whose
 * session is no live command's is killed, wherever it sits in the tree. Returns how many it signalled.
 */
function sweepNamespace(
  init: { pid: number; startTime: string | null },
  live: ReadonlySet<number>,
  view: ProcessView,
): number {
  let changed = 0;
  for (const pid of view.namespaceMembers(init.pid)) {
    const status = view.status(pid);
    // An ended process cannot run; its parent (af-init, or a process this pass kills) reaps it. A zombie
    // leader with live threads has not ended: SIGKILL to its pid ends the whole group.
    if (status !== null && !status.ended && !spared(status.sid, live) && view.kill(pid)) changed++;
  }
  return changed;
}

/**
 * Kills every process of the launcher's namespace that belongs to no live command (`live`: their session
 * ids in the namespace, which are their pids there). Tree passes over af-init's children repeat until one
 * finds nothing to kill and no child of af-init dying (processes forked or orphaned between the listing
 * and the kill are re-parented to af-init and caught by the next pass); then a scan of the whole
 * namespace must find nothing either. The tree passes alone are not enough: the kernel's children file
 * can skip a child while that list changes under the read, and a sweep runs exactly while a command's
 * processes exit and af-init reaps them (a command's setsid'd child, re-parented to af-init, was in no
 * listing and survived a timeout: a flaky runtime test, twice). Resolves false if something was still
 * there at the deadline.
 */
export async function killLeftovers(
  init: { pid: number; startTime: string | null },
  live: ReadonlySet<number>,
  view: ProcessView = HOST,
): Promise<boolean> {
  const deadline = Date.now() + SWEEP_DEADLINE_MS;
  for (;;) {
    // af-init's pid may be reused after it died: never walk someone else's children or namespace. The
    // passes below are synchronous, so this holds for both.
    if (!view.same(init.pid, init.startTime)) return true;
    if (sweepOnce(init, live, view) === 0 && sweepNamespace(init, live, view) === 0) return true;
    if (Date.now() > deadline) return false;
    await sleep(2);
  }
}
