// The data directory: where it is and what lives where. Every path the control plane touches under it is
// built here from an already validated id, so no client string is ever joined into a path elsewhere.
import { mkdir, chmod } from 'node:fs/promises';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
// protocol/core (no msgpack): the CLI resolves the data directory before it loads anything else.
import { InvalidArgumentError } from '@agentfense/protocol/core';
import { validateId } from './ids.js';

/** Environment variable that overrides the default data directory. */
export const DATA_DIR_ENV = 'AGENTFENSE_DATA_DIR';

/**
 * The data directory: the explicit option, else $AGENTFENSE_DATA_DIR, else $XDG_DATA_HOME/agentfense,
 * else ~/.local/share/agentfense. Always absolute.
 */
export function resolveDataDir(
  options: { dataDir?: string | undefined; env?: NodeJS.ProcessEnv } = {},
): string {
  const env = options.env ?? process.env;
  const chosen =
    options.dataDir ??
    nonEmpty(env[DATA_DIR_ENV]) ??
    (nonEmpty(env.XDG_DATA_HOME) !== undefined && isAbsolute(env.XDG_DATA_HOME ?? '')
      ? join(env.XDG_DATA_HOME ?? '', 'agentfense')
      : join(homedir(), '.local', 'share', 'agentfense'));
  if (chosen.includes('\0')) throw new InvalidArgumentError('the data directory path contains a NUL byte');
  return resolve(chosen);
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/** Where everything lives under one data directory. */
export class DataLayout {
  readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  /** The metadata database. */
  get database(): string {
    return join(this.root, 'agentfense.db');
  }
  get logsDir(): string {
    return join(this.root, 'logs');
  }
  /** The control plane's JSON-lines log. */
  get controlLog(): string {
    return join(this.logsDir, 'control.log');
  }
  /** Where workers spawned ahead of time log until their mount names their sandbox's log file. */
  get workerPoolLog(): string {
    return join(this.logsDir, 'worker-pool.log');
  }
  get codebasesDir(): string {
    return join(this.root, 'codebases');
  }
  get sandboxesDir(): string {
    return join(this.root, 'sandboxes');
  }
  /** Room kept for destroy, discard and codebase deletion on a full filesystem (disk/reserve.ts). */
  get spaceReserve(): string {
    return join(this.root, 'space-reserve');
  }
  /** Frozen delta layers (checkpoints), shared by every sandbox whose stack holds them. */
  get layersDir(): string {
    return join(this.root, 'layers');
  }
  /** One frozen layer's directory. */
  layerDir(id: string): string {
    return join(this.layersDir, validateId('layer', id));
  }
  /** Destroyed sandboxes' directories being removed in the background (sandboxes/trash.ts). */
  get trashDir(): string {
    return join(this.root, 'trash');
  }

  /** A stored codebase's directory (its files are under `files/`). */
  codebaseDir(id: string): string {
    return join(this.codebasesDir, validateId('codebase', id));
  }
  /** A stored codebase's content: the worker's lower layer. */
  codebaseFiles(id: string): string {
    return join(this.codebaseDir(id), 'files');
  }

  /** Everything one sandbox owns. */
  sandbox(id: string): SandboxPaths {
    const dir = join(this.sandboxesDir, validateId('sandbox', id));
    const mnt = join(dir, 'mnt');
    return {
      dir,
      delta: join(dir, 'delta'),
      mnt,
      workspace: join(mnt, 'workspace'),
      state: join(dir, 'state'),
      workerLog: join(dir, 'worker.log'),
      auditLog: join(dir, 'audit.jsonl'),
      forgotten: join(dir, 'forgotten'),
      hostUser: join(dir, 'host-user'),
    };
  }
}

/** The paths of one sandbox. */
export interface SandboxPaths {
  readonly dir: string;
  /** The copy-on-write delta (survives stops, restarts and crashes). */
  readonly delta: string;
  /** Bound on itself and made a shared mount, so a remounted worker propagates into a running sandbox. */
  readonly mnt: string;
  /** The FUSE mountpoint; the runtime binds it at /workspace. */
  readonly workspace: string;
  /** The runtime's scratch state. */
  readonly state: string;
  readonly workerLog: string;
  readonly auditLog: string;
  /**
   * Written by a one-shot `run` that deleted the sandbox's record and left the rest to its reaper
   * (cli/forget-one-shot.ts): a directory with this file and no record is safe to remove.
   */
  readonly forgotten: string;
  /** `uid:gid` of the host user leased to the sandbox (sandboxes/host-user.ts); its delta's files are its. */
  readonly hostUser: string;
}

/** mkdir -p with mode 0700 on every directory it creates and on `dir` itself. */
export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
}
