// Process identities (pid + kernel start time) live in @agentfense/protocol: the docker runtime's container
// pool labels its containers with its owner's identity too. Waiting for a killed process is the control
// plane's.
import { readFileSync, readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

export { isSameProcess, processStartTime, selfIdentity } from '@agentfense/protocol';

/** Fields 3 (state) and 22 (start time) of a /proc stat file, or undefined when it cannot be read. */
function stateAndStart(path: string): { state: string; start: string } | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: rest[0] ?? '', start: rest[19] ?? '' };
}

/**
 * True while some thread of the process `pid` that started at `start` still runs. A SIGKILLed process's
 * main thread is a zombie as soon as it exits, while another thread may still be finishing a system call
 * (a worker's rename into the codebase, in its thread pool): only when every thread is gone is it done.
 */
function stillRunning(pid: number, start: string): boolean {
  if (stateAndStart(`/proc/${pid}/stat`)?.start !== start) return false; // gone, or the pid reused
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  return tids.some((tid) => {
    const state = stateAndStart(`/proc/${pid}/task/${tid}/stat`)?.state;
    return state !== undefined && state !== 'Z' && state !== 'X';
  });
}

/** Waits, at most `ms`, until no thread of process `pid` (started at `start`) runs; false on timeout. */
export async function waitGone(pid: number, start: string, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (stillRunning(pid, start)) {
    if (Date.now() > deadline) return false;
    await sleep(5);
  }
  return true;
}
