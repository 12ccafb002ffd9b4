// Starting a data directory's run helper: detached (its own session, no stdio), in the background of the
// in-process run that found none. Two runs that both start one are fine: the second helper finds the
// first's socket live and exits (server.ts).
import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { RUN_HELPER_ENV, helperSocketPath } from './protocol.js';

/**
 * The helper's entry: tsc's output next to this file (the bundle maps import.meta.url back to it, see
 * scripts/bundle-cli.js). Its start-up cost is paid once, in the background.
 */
const ENTRY = fileURLToPath(new URL('./main.js', import.meta.url));

/** Starts the run helper of `dataDir` unless it is switched off or one is there already. */
export function startRunHelper(dataDir: string): void {
  if (process.env[RUN_HELPER_ENV] === '0') return;
  if (statSync(helperSocketPath(dataDir), { throwIfNoEntry: false }) !== undefined) return;
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
