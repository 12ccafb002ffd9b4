// `agentfense run` needs one FUSE worker, a node process of its own whose start-up (~100-400 ms on the
// shared 2-core host) used to begin only once the CLI had loaded the control plane. The executable calls
// startWorkerForRun() first thing, before it loads commander, SQLite or the runtimes, so both node
// start-ups overlap; the pool's first spawnWorker() adopts that process (fuse-worker's
// takeEarlyWorker, matched on the exact command line). Nothing else changes: if the guess is wrong (no
// run after all, another data directory), the pool spawns as before and discardEarlyWorker() kills the
// unused process when the CLI is done.
import { statSync } from 'node:fs';
import { POOL_WORKER_NAME, discardEarlyWorker, startEarlyWorker } from '@agentfense/fuse-worker/process';
import { DataLayout, resolveDataDir } from '../paths.js';
import { parseRunLine } from './run-line.js';

export { discardEarlyWorker };

/** Starts the worker of an `agentfense run … -- cmd` now; does nothing for any other command line. */
export function startWorkerForRun(argv: readonly string[]): void {
  const line = parseRunLine(argv);
  if (line === undefined) return;
  try {
    const layout = new DataLayout(resolveDataDir({ dataDir: line.data }));
    // A data directory's first use: the control plane creates its directories (with their modes) first,
    // and the worker could not open its log yet. Spawned the usual way then.
    if (statSync(layout.logsDir, { throwIfNoEntry: false })?.isDirectory() !== true) return;
    startEarlyWorker({ logFile: layout.workerPoolLog, name: POOL_WORKER_NAME });
  } catch {
    // A bad --data value and the like: `run` reports it itself; the worker is spawned the usual way.
  }
}
