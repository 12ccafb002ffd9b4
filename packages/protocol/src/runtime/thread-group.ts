// Whether a process can still run, for the sweeps that kill what a sandbox command left behind (runtime-bwrap
// launcher/process-tree.ts, runtime-docker container/cgroup.ts). /proc/<pid>/status shows a thread group's leader as a
// zombie ("Z") as soon as the leader thread itself exits (exit(2), pthread_exit from main), even while other
// threads of the group run on: the leader is reaped only with the last thread. Taking that "Z" for a dead
// process let such a group outlive every sweep. A SIGKILL to the pid still reaches the whole group (the
// kernel delivers it to a live thread), so it is killed like any process once it is seen as alive.
import { readdirSync, readFileSync } from 'node:fs';

/** True when the state letter (field 3 of stat, or the `State:` line) means the task has exited. */
function isExitedState(state: string): boolean {
  return state === 'Z' || state === 'X';
}

/** The state letter of a task's `stat` line; the command name (field 2) may hold spaces and ')'. */
function stateOfStat(text: string): string {
  return text.slice(text.lastIndexOf(')') + 2, text.lastIndexOf(')') + 3);
}

/**
 * Whether any thread of `pid`'s thread group other than its leader is still running: the leader's own
 * "Z" then says nothing about the process. False once the group is gone. Synchronous: /proc answers from
 * memory, and callers use it between a listing and a kill that must not be far apart.
 */
function hasLiveThread(pid: number, proc = '/proc'): boolean {
  let tasks: string[];
  try {
    tasks = readdirSync(`${proc}/${String(pid)}/task`);
  } catch {
    return false; // gone
  }
  for (const tid of tasks) {
    if (tid === String(pid)) continue;
    try {
      if (!isExitedState(stateOfStat(readFileSync(`${proc}/${String(pid)}/task/${tid}/stat`, 'utf8'))))
        return true;
    } catch {
      // That thread exited between the listing and the read.
    }
  }
  return false;
}

/**
 * Whether a process whose leader reports `leaderState` has ended: only when the leader exited and no other
 * thread of its group runs. A process that has ended cannot run or fork again; its parent reaps it.
 */
export function processEnded(pid: number, leaderState: string, proc = '/proc'): boolean {
  return isExitedState(leaderState) && !hasLiveThread(pid, proc);
}
