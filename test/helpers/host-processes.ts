// Sandbox processes as the host sees them: found by a marker in their command line, with the uid lines
// and effective capabilities of /proc/<pid>/status (the host's view, not what the sandbox is shown).
import { readFile, readdir } from 'node:fs/promises';

export interface HostProcess {
  readonly pid: number;
  /** The Uid line: real, effective, saved and filesystem uid. */
  readonly uid: string;
  readonly capEff: string;
}

/** Host pids whose command line contains `marker` (the test runner's own left out). */
export async function hostProcesses(marker: string): Promise<HostProcess[]> {
  const found: HostProcess[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (!cmdline.includes(marker) || cmdline.includes('vitest')) continue;
    const status = await readFile(`/proc/${entry}/status`, 'utf8').catch(() => '');
    const uid = /^Uid:\s+(.*)$/m.exec(status)?.[1] ?? '';
    const capEff = /^CapEff:\s+(\S+)$/m.exec(status)?.[1] ?? '';
    if (uid !== '') found.push({ pid: Number(entry), uid, capEff });
  }
  return found;
}

/** Waits (up to 10 s) until a process with `marker` in its command line shows up on the host. */
export async function waitForHostProcesses(marker: string): Promise<HostProcess[]> {
  for (let i = 0; i < 200; i++) {
    const seen = await hostProcesses(marker);
    if (seen.length > 0) return seen;
    await new Promise((r) => setTimeout(r, 50));
  }
  return [];
}

/** Every uid the processes have (any of real, effective, saved, filesystem). */
export function hostUidsOf(processes: readonly HostProcess[]): Set<number> {
  return new Set(processes.flatMap((p) => p.uid.split(/\s+/).map(Number)));
}
