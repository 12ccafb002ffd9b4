// The bwrap SandboxRuntime: checks the host once, then starts sandboxes (scratch files, cgroups, argv).
import { rm, stat } from 'node:fs/promises';
import { posix } from 'node:path';
import type { RuntimeInstance, RuntimeStartOptions, SandboxRuntime } from '@agentfense/protocol';
import { InvalidArgumentError, validateEnv, validateHostPath, validateSandboxId } from '@agentfense/protocol';
import { checkFuseDevice, probeBwrap, resolveBwrapPath } from './check.js';
import { createSandboxCgroup } from './cgroups.js';
import { NO_LIMITS } from './cgroups/plan.js';
import { prepareSandboxEtc } from './etc-files.js';
import { DEFAULT_MAX_OUTPUT_BYTES, MAX_OUTPUT_BYTES_LIMIT } from './launch.js';
import { BwrapInstance } from './instance.js';
import { createStderrLogger } from './logger.js';
import type { RuntimeLogger } from './logger.js';
import { resolveSystemMounts } from './system-mounts.js';

/** Configuration of the bwrap runtime (all optional; defaults suit Debian 12 hosts). */
export interface BwrapRuntimeOptions {
  /** The bwrap executable; default: `bwrap` found on PATH or in /usr/bin. */
  readonly bwrapPath?: string;
  /** Read-only system directories; default DEFAULT_SYSTEM_DIRS. */
  readonly systemDirs?: readonly string[];
  /** Host /etc entries (relative to /etc) copied into the sandbox's /etc; default DEFAULT_ETC_ENTRIES. */
  readonly etcEntries?: readonly string[];
  /** Where cgroup hierarchies are mounted; default /sys/fs/cgroup. */
  readonly cgroupRoot?: string;
  /** Directory under each hierarchy's root for per-sandbox cgroups; default "agentfense". */
  readonly cgroupParent?: string;
  /** The control plane's data directory: shown as `<data>` in audit records. */
  readonly dataDir?: string;
  /** check() requires /dev/fuse (default true; the workspace is a FUSE mount). */
  readonly requireFuse?: boolean;
  /** Cap on each of stdout/stderr of `exec` (bytes; default 16 MiB, at most 32 MiB); exceeding it kills the command. */
  readonly maxOutputBytes?: number;
  readonly logger?: RuntimeLogger;
}

/** Name of the runtime's scratch directory inside each sandbox's stateDir. */
const SCRATCH_DIR = 'bwrap';

/** Creates the bwrap runtime. Holds no global state: two runtimes are fully independent. */
export function createBwrapRuntime(options: BwrapRuntimeOptions = {}): SandboxRuntime {
  const logger = options.logger ?? createStderrLogger();
  const maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  if (
    !Number.isSafeInteger(maxOutputBytes) ||
    maxOutputBytes < 1 ||
    maxOutputBytes > MAX_OUTPUT_BYTES_LIMIT
  ) {
    throw new InvalidArgumentError(`maxOutputBytes must be an integer in 1..${MAX_OUTPUT_BYTES_LIMIT}`);
  }
  // The successful check is cached (bwrap does not disappear under us); a failed one is retried next time,
  // so fixing the host does not need a restart.
  let checked: Promise<string> | undefined;
  const check = (): Promise<string> => {
    checked ??= (async () => {
      const bwrapPath = await resolveBwrapPath(options.bwrapPath);
      await probeBwrap(bwrapPath);
      if (options.requireFuse !== false) await checkFuseDevice();
      return bwrapPath;
    })();
    // Not a swallowed error: callers still get the rejection; this only forgets it so the next call retries.
    checked.catch(() => {
      checked = undefined;
    });
    return checked;
  };

  const start = async (start: RuntimeStartOptions): Promise<RuntimeInstance> => {
    const sandboxId = validateSandboxId(start.sandboxId);
    const workspaceHostPath = validateHostPath(start.workspaceHostPath, 'workspaceHostPath');
    const stateDir = validateHostPath(start.stateDir, 'stateDir');
    const env = validateEnv(start.env ?? {});
    const bwrapPath = await check();
    const workspace = await stat(workspaceHostPath).catch((err: unknown) => {
      throw new InvalidArgumentError(
        `workspace ${workspaceHostPath} is not accessible: ${(err as Error).message}`,
        { cause: err },
      );
    });
    if (!workspace.isDirectory())
      throw new InvalidArgumentError(`workspace ${workspaceHostPath} is not a directory`);

    const scratchDir = posix.join(stateDir, SCRATCH_DIR);
    // A scratch dir left by a crashed control plane would make the /etc copy fail: start from nothing.
    await rm(scratchDir, { recursive: true, force: true });
    const etcDir = posix.join(scratchDir, 'etc');
    let systemMounts: Awaited<ReturnType<typeof resolveSystemMounts>>;
    let cgroup: Awaited<ReturnType<typeof createSandboxCgroup>>;
    try {
      await prepareSandboxEtc({
        dir: etcDir,
        logger,
        ...(options.etcEntries === undefined ? {} : { entries: options.etcEntries }),
      });
      systemMounts = await resolveSystemMounts({
        etcDir,
        ...(options.systemDirs === undefined ? {} : { systemDirs: options.systemDirs }),
      });
      cgroup = await createSandboxCgroup({
        sandboxId,
        limits: start.resources ?? {},
        logger,
        ...(options.cgroupRoot === undefined ? {} : { root: options.cgroupRoot }),
        ...(options.cgroupParent === undefined ? {} : { parent: options.cgroupParent }),
      });
    } catch (err) {
      // A failed start leaves nothing behind (createSandboxCgroup cleans up its own partial work).
      await rm(scratchDir, { recursive: true, force: true });
      throw err;
    }
    const placeholders = [
      { hostPath: workspaceHostPath, placeholder: '<workspace>' },
      { hostPath: stateDir, placeholder: '<state>' },
      ...(options.dataDir === undefined
        ? []
        : [{ hostPath: validateHostPath(options.dataDir, 'dataDir'), placeholder: '<data>' }]),
    ];
    logger.debug({ sandboxId, limits: cgroup?.limits ?? NO_LIMITS }, 'sandbox started');
    return new BwrapInstance({
      sandboxId,
      bwrapPath,
      workspaceHostPath,
      network: start.network === true,
      env,
      systemMounts,
      cgroup,
      limits: cgroup?.limits ?? NO_LIMITS,
      placeholders,
      scratchDir,
      maxOutputBytes,
      logger,
    });
  };

  return {
    name: 'bwrap',
    check: async () => {
      await check();
    },
    start,
  };
}
