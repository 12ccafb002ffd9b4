// `agentfense gc --all-helpers`: stops every run helper of a data directory (server.ts), for an operator
// who wants the directory quiet at once (before removing or moving it) rather than after the helpers'
// idle time. A helper is found by its command line as spawn.ts makes it (`node …/run-helper/main.js
// --data DIR`) and its uid (this user's: another user's process is not ours to stop), sent SIGTERM (it
// stops its runs as a signal to their client would, removes its spare and exits) and waited for.
import { readFile, readdir, stat } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

/** How long the helpers get to exit after SIGTERM. */
const STOP_WAIT_MS = 30_000;
const POLL_MS = 100;

/** Pids of this user's run helpers serving `dataDir` (an absolute, resolved path). */
export async function runHelperPids(dataDir: string): Promise<number[]> {
  const uid = process.getuid?.() ?? 0;
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    if (await isHelperOf(Number(name), dataDir, uid)) pids.push(Number(name));
  }
  return pids;
}

async function isHelperOf(pid: number, dataDir: string, uid: number): Promise<boolean> {
  const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
  if (!(argv[1] ?? '').endsWith('/run-helper/main.js') || argv[2] !== '--data' || argv[3] !== dataDir) {
    return false;
  }
  return (await stat(`/proc/${pid}`).catch(() => undefined))?.uid === uid;
}

/**
 * SIGTERMs every run helper of `dataDir` and waits until they are gone; resolves the pids stopped and
 * those still running after the wait.
 */
export async function stopRunHelpers(
  dataDir: string,
  options: { readonly waitMs?: number } = {},
): Promise<{ readonly stopped: number[]; readonly running: number[] }> {
  const uid = process.getuid?.() ?? 0;
  const pids = await runHelperPids(dataDir);
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err; // exited meanwhile
    }
  }
  const deadline = Date.now() + (options.waitMs ?? STOP_WAIT_MS);
  let running = pids;
  while (running.length > 0 && Date.now() < deadline) {
    await sleep(POLL_MS);
    const still: number[] = [];
    for (const pid of running) if (await isHelperOf(pid, dataDir, uid)) still.push(pid);
    running = still;
  }
  return { stopped: pids.filter((pid) => !running.includes(pid)), running };
}
