// CPU a process spent, for the set-up step's decomposition: a relay's CPU per connection is what its
// work costs every connection on a machine whose cores are busy (there, CPU is latency). Read from
// /proc/<pid>/task/*/schedstat (nanoseconds on a CPU, every thread), so a policy point's relay thread
// counts too.
import { readFile, readdir } from 'node:fs/promises';

/** Nanoseconds `pid` (all its threads) has run; NaN when it is gone or /proc says nothing. */
export async function cpuNs(pid) {
  try {
    const tasks = await readdir(`/proc/${pid}/task`);
    let total = 0;
    for (const tid of tasks) {
      const text = await readFile(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').catch(() => '0');
      total += Number(text.split(' ')[0]);
    }
    return total;
  } catch {
    return NaN;
  }
}

/**
 * The policy point of sandbox `id`: the process in its network cgroup (`agentfense-network/<id>`),
 * or undefined where the control plane could not make one (not root).
 */
export async function policyPointPid(id) {
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cgroup = await readFile(`/proc/${entry}/cgroup`, 'utf8').catch(() => '');
    if (cgroup.includes(`/agentfense-network/${id}\n`)) return Number(entry);
  }
  return undefined;
}
