// What a sandbox's bwrap leaves running when the control plane that launched it is SIGKILLed: bwrap's
// --die-with-parent does not always take the sandbox down (a pid-namespace init may outlive its monitor,
// seen with the nested user namespace of --disable-userns), and no control plane is left to SIGKILL its
// pid 1. Recovery (the next process to open the data directory) calls clearLeftovers(stateDir) and this
// finds those processes by what only they carry: a bwrap whose argv names a path inside the sandbox's
// directory (the parent of stateDir: its workspace mount is bound from there). SIGKILL of a namespace's
// pid 1 makes the kernel kill every process in it.
import { readFile, readdir, readlink } from 'node:fs/promises';
import { posix } from 'node:path';

/** SIGKILLs the bwrap processes of the sandbox whose state directory is `stateDir`; returns their pids. */
export async function killSandboxProcesses(stateDir: string, bwrapPath: string): Promise<number[]> {
  const sandboxDir = posix.dirname(stateDir);
  const inside = `${sandboxDir}/`;
  const killed: number[] = [];
  for (const name of await readdir('/proc').catch(() => [] as string[])) {
    const pid = Number(name);
    if (!Number.isSafeInteger(pid) || pid <= 1 || pid === process.pid) continue;
    // Only bwrap itself (the monitor or the namespace's pid 1): never an unrelated process that happens to
    // mention the path.
    const exe = await readlink(`/proc/${pid}/exe`).catch(() => null);
    if (exe !== bwrapPath) continue;
    const argv = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (!argv.split('\0').some((arg) => arg.startsWith(inside))) continue;
    try {
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      // Gone meanwhile.
    }
  }
  return killed;
}
