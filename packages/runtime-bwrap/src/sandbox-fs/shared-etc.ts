// The sandbox /etc that every sandbox of a runtime binds read-only: prepared once per host state with a
// data directory (host-cache.ts), else once per process in a private temporary directory removed at exit.
import { rmSync } from 'node:fs';
import { chmod, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { posix } from 'node:path';
import { cachedEtc, etcFingerprint } from '../host/host-cache.js';
import type { RuntimeLogger } from '../logger.js';
import { DEFAULT_ETC_ENTRIES, generatedEtcContents, prepareSandboxEtc } from './etc-files.js';
import { prepareRunDir } from './run-dir.js';

/**
 * The sandbox /etc, shared read-only by every sandbox: it holds copies of host entries and our generated
 * passwd/group/hosts, nothing per sandbox, and each sandbox binds it with --ro-bind (so no sandbox can
 * change what another sees). With a data directory it is prepared once per host state and reused across
 * processes (host-cache.ts); without one, once per process in a private temporary directory removed at
 * exit.
 */
export async function prepareSharedEtc(options: {
  dataDir: string | undefined;
  /** Set when bwrap runs as a sandbox user: a directory every sandbox's user can reach. */
  runDir: string | undefined;
  entries: readonly string[] | undefined;
  logger: RuntimeLogger;
}): Promise<string> {
  const build = (dir: string): Promise<void> =>
    prepareSandboxEtc({
      dir,
      logger: options.logger,
      ...(options.entries === undefined ? {} : { entries: options.entries }),
    });
  // Every sandbox's user must reach it: root's, 0711 (run-dir.ts); the copy itself is world-readable.
  if (options.runDir !== undefined) await prepareRunDir(options.runDir);
  if (options.dataDir !== undefined || options.runDir !== undefined) {
    return cachedEtc({
      runDir: options.runDir ?? posix.join(options.dataDir ?? '', 'run'),
      fingerprint: etcFingerprint('/etc', options.entries ?? DEFAULT_ETC_ENTRIES, generatedEtcContents()),
      build,
    });
  }
  // mkdtemp makes it 0700 and ours alone; removed at exit.
  const dir = await mkdtemp(posix.join(tmpdir(), 'agentfense-etc-'));
  removeAtExit(dir);
  await chmod(dir, 0o755);
  await build(posix.join(dir, 'etc'));
  return posix.join(dir, 'etc');
}

// Temporary /etc copies of runtimes without a data directory, removed when the process exits. One
// exit listener for all of them: a listener per runtime would pile up (and trip MaxListeners) in a
// process that creates many runtimes.
const tempEtcDirs = new Set<string>();
function removeAtExit(dir: string): void {
  if (tempEtcDirs.size === 0) {
    process.once('exit', () => {
      for (const d of tempEtcDirs) rmSync(d, { recursive: true, force: true });
    });
  }
  tempEtcDirs.add(dir);
}
