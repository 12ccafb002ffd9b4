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
// Limitation (docs/decisions.md): a daemon of a still-running command that both left its session and lost
// its parent cannot be told from a leftover; it is killed when any command of the sandbox ends.
import { readFileSync, readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { isSameProcess } from '@agentfense/protocol';

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

/** A process's state letter and its session id in the innermost pid namespace; null once it is gone. */
function statusOf(pid: number): { state: string; sid: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${String(pid)}/status`, 'utf8');
  } catch {
    return null;
  }
  const state = /^State:\s+(\S)/m.exec(text)?.[1] ?? '?';
  const sids = /^NSsid:\s+([\d\s]+?)\s*$/m.exec(text)?.[1]?.split(/\s+/);
  const sid = Number(sids?.[sids.length - 1] ?? Number.NaN);
  return { state, sid };
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

/** What a sweep reads of the host's processes and does to them (the host's /proc; tests give their own). */
export interface ProcessView {
  /** Host pids of a process's children. */
  children(pid: number): number[];
  /** State letter and session id in the innermost pid namespace; null once the process is gone. */
  status(pid: number): { state: string; sid: number } | null;
  /** SIGKILL; false if the process was gone. */
  kill(pid: number): boolean;
  /** Whether `pid` is still the process that started at `startTime`. */
  same(pid: number, startTime: string | null): boolean;
}

const HOST: ProcessView = { children: childrenOf, status: statusOf, kill, same: isSameProcess };

/**
 * One pass; returns how many live (not zombie) processes it signalled, plus how many of af-init's children
 * it found dead or dying. Synchronous: no command starts in between.
 */
function sweepOnce(
  init: { pid: number; startTime: string | null },
  live: ReadonlySet<number>,
  view: ProcessView,
): number {
  // af-init's pid may be reused after it died: never walk someone else's children.
  if (!view.same(init.pid, init.startTime)) return 0;
  let changed = 0;
  for (const child of view.children(init.pid)) {
    const status = view.status(child);
    if (status === null || status.state === 'Z') {
      // It died after af-init's children were listed (a command's root killed by its group's SIGKILL, which
      // races the sweep): its own children are af-init's now, and were not in that listing. The next pass
      // sees them; ending here left a command's setsid'd child alive (a flaky runtime test caught it).
      changed++;
      continue;
    }
    // A live command or its orphan (killed when that command ends); session 1 is af-init's own, which a
    // command's process has only between its fork and its setsid().
    if (live.has(status.sid) || status.sid === 1) continue;
    for (const pid of subtree(child, view)) {
      const s = view.status(pid);
      if (s !== null && s.state !== 'Z' && view.kill(pid)) changed++;
    }
  }
  return changed;
}

/**
 * Kills every process of the launcher's namespace that belongs to no live command (`live`: their session
 * ids in the namespace, which are their pids there), repeating until a pass finds nothing to kill and no
 * child of af-init dying (processes forked or orphaned between the listing and the kill are re-parented to
 * af-init and caught by the next pass). Resolves false if something was still there at the deadline. The
 * first pass is synchronous, so when nothing is left (the usual case) the whole sweep costs one read of
 * af-init's children.
 */
export async function killLeftovers(
  init: { pid: number; startTime: string | null },
  live: ReadonlySet<number>,
  view: ProcessView = HOST,
): Promise<boolean> {
  const deadline = Date.now() + SWEEP_DEADLINE_MS;
  while (sweepOnce(init, live, view) > 0) {
    if (Date.now() > deadline) return false;
    await sleep(2);
  }
  return true;
}
