// Starting a data directory's run helper: detached (its own session, no stdio), in the background of the
// in-process run that found none answering. Two runs that both start one are fine: only one helper gets
// the data directory's lock, the other exits (server.ts). A socket nobody answers on (its helper was
// SIGKILLed, OOM-killed, or the machine rebooted) does not stop a new one: the new helper replaces it.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { RUN_HELPER_ENV, helperAnswers, helperSocketPath } from './protocol.js';

/**
 * The helper's entry: tsc's output next to this file (the bundle maps import.meta.url back to it, see
 * scripts/bundle-cli.js). Its start-up cost is paid once, in the background.
 */
const ENTRY = fileURLToPath(new URL('./main.js', import.meta.url));

/** Starts the run helper of `dataDir` unless it is switched off or one answers there already. */
export async function startRunHelper(dataDir: string): Promise<void> {
  if (process.env[RUN_HELPER_ENV] === '0') return;
  if (await helperAnswers(helperSocketPath(dataDir))) return;
  try {
    const child = spawn(process.execPath, [ENTRY, '--data', dataDir], {
      detached: true,
      stdio: 'ignore',
      // Not the first run's cwd: a long-lived process there would keep that directory busy (umount).
      cwd: '/',
      env: process.env,
    });
    child.on('error', () => undefined); // no helper: the next run is in-process, as before
    child.unref();
  } catch {
    // Likewise (e.g. EAGAIN at the process limit).
  }
}
