// The run helper (packages/control/src/cli/run-helper) as the CLI tests see it from outside: its pids by
// data directory, starting one with a first in-process run, and stopping it. Shared by the test files
// that switch the helper on (it is off by default in the system tests, vitest.config.ts).
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';

/** Pids of the run helper serving `dataDir`. */
export async function helperPids(dataDir: string): Promise<number[]> {
  const r = await execa('pgrep', ['-f', `run-helper/main.js --data ${dataDir}$`], { reject: false });
  return r.stdout.split('\n').filter(Boolean).map(Number);
}

/** Waits until `check` holds, polling every 50 ms; throws naming `what` after `timeoutMs`. */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Whether the helper's socket is in `dataDir` (it is bound once the helper is ready). */
export async function helperListening(dataDir: string): Promise<boolean> {
  return (await stat(join(dataDir, 'run-helper.sock')).catch(() => null))?.isSocket() === true;
}

/**
 * The first run of `dataDir` (`argv`: the CLI's program and arguments), which works in-process and starts
 * the helper; resolves once the helper listens.
 */
export async function startHelper(
  argv: readonly string[],
  dataDir: string,
  env: Record<string, string>,
): Promise<void> {
  const first = await execa(process.execPath, argv, { env, reject: false });
  if (first.exitCode !== 0)
    throw new Error(`the first run failed (${String(first.exitCode)}): ${first.stderr}`);
  await until('the run helper to listen', () => helperListening(dataDir));
}

/** SIGTERMs the helper of `dataDir` (if any) and waits until it has exited. */
export async function stopHelper(dataDir: string): Promise<void> {
  for (const pid of await helperPids(dataDir)) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch (err) {
      // It exited between pgrep and the kill (its idle timeout, or the test's last run ended it).
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
  await until('the run helper to exit', async () => (await helperPids(dataDir)).length === 0);
}
