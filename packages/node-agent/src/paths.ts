// What a client may name on this node: a sandbox id (a directory name under the state directory) and a
// codebase path, which must resolve to a directory strictly inside the configured codebase root. The agent
// is root and the client's word is the only thing that picks a host path, so both are checked here, before
// anything touches the disk, and the worker then opens the codebase without following a symlink and pinned
// to the identity checked here (a swap after the check is refused by the worker).
import { realpath, stat } from 'node:fs/promises';
import { posix } from 'node:path';
import { InvalidArgumentError, PermissionDeniedError, validateSandboxId } from '@agentfense/protocol';

/** The longest sandbox id accepted (a directory name and a label value). */
const MAX_ID_LENGTH = 100;

/** A sandbox id fit to be a directory name under the state directory. */
export function checkSandboxId(id: unknown): string {
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID_LENGTH) {
    throw new InvalidArgumentError('sandboxId: a non-empty string of at most 100 characters');
  }
  return validateSandboxId(id);
}

/**
 * The real path of `path` if it is a directory strictly inside `root` (itself resolved), else an error:
 * InvalidArgumentError for a malformed path, PermissionDeniedError for one outside the root (symlinks
 * included: the resolved path is what counts).
 */
export async function resolveCodebase(root: string, path: unknown): Promise<string> {
  if (typeof path !== 'string' || path.length === 0 || path.length > 4096 || path.includes('\0')) {
    throw new InvalidArgumentError('codebasePath: an absolute path');
  }
  if (!posix.isAbsolute(path) || posix.normalize(path) !== path || path.endsWith('/')) {
    throw new InvalidArgumentError(
      `codebasePath ${JSON.stringify(path)}: an absolute path without ".", ".." or repeated "/"`,
    );
  }
  const realRoot = await realpath(root);
  const real = await realpath(path).catch(() => {
    throw new InvalidArgumentError(`codebasePath ${JSON.stringify(path)} does not exist on this node`);
  });
  if (!real.startsWith(`${realRoot}/`)) {
    throw new PermissionDeniedError(
      `codebasePath ${JSON.stringify(path)} is outside this node's codebase root`,
    );
  }
  if (!(await stat(real)).isDirectory()) {
    throw new InvalidArgumentError(`codebasePath ${JSON.stringify(path)} is not a directory`);
  }
  return real;
}

/** Where the agent keeps one sandbox's things under its state directory. */
export interface SandboxPaths {
  /** Root-only (0700): the sandbox's directory. */
  readonly dir: string;
  /** The delta (changes since the codebase), kept across detach and agent restarts. */
  readonly delta: string;
  /** The FUSE mount point on the host; the container gets a clone of this mount. */
  readonly view: string;
  /** The worker's log and its pid record (pid and start time, for the clean-up after a restart). */
  readonly workerLog: string;
  readonly workerPid: string;
  /** The sandbox's audit trail (the worker's decisions), kept with the delta and read by the API tier. */
  readonly auditLog: string;
}

/** The state directory's folder of sandboxes. */
export function sandboxesDir(stateDir: string): string {
  return posix.join(stateDir, 'sandboxes');
}

export function sandboxPaths(stateDir: string, sandboxId: string): SandboxPaths {
  const dir = posix.join(sandboxesDir(stateDir), sandboxId);
  return {
    dir,
    delta: posix.join(dir, 'delta'),
    view: posix.join(dir, 'view'),
    workerLog: posix.join(dir, 'worker.log'),
    workerPid: posix.join(dir, 'worker.pid'),
    auditLog: posix.join(dir, 'audit.jsonl'),
  };
}
