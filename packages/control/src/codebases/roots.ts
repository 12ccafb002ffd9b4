// The one way the control plane opens a codebase's root directory on the host (API listings, downloads,
// uploads, and the check before a worker mounts it). A linked directory belongs to its user: any parent
// of it can be swapped for a symlink or another directory at any time, so it is opened without following
// a symlink in any component and must be the directory recorded when it was linked (device, inode).
import { constants } from 'node:fs';
import { open, realpath } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { DirIdentity } from '@agentfense/protocol';
import { identityOf, openPinnedDir } from '@agentfense/fuse-worker';
import { parseIdentity } from '../store/codebases.js';
import type { CodebaseRow, CodebaseStore } from '../store/codebases.js';

export interface CodebaseRootOptions {
  readonly store: CodebaseStore;
  readonly logger: Logger;
  /** Where a stored codebase's files are (the data directory's own path: trusted). */
  readonly storedPath: string;
}

/** A codebase's root, opened; the caller closes `handle`. */
export interface OpenedRoot {
  readonly handle: FileHandle;
  /** The path a worker mounts (for a stored codebase, its real path). */
  readonly path: string;
  /** A linked directory's recorded identity (undefined for a stored codebase). */
  readonly identity: DirIdentity | undefined;
}

/**
 * Opens the root of `row`. Linked: no symlink in any component, and the recorded identity; a record
 * from before identities were kept gets the identity of the directory found now (its first use).
 */
export async function openCodebaseRoot(row: CodebaseRow, options: CodebaseRootOptions): Promise<OpenedRoot> {
  if (row.kind === 'stored') {
    // The data directory's path may itself lead through a symlink (`--data` given as one): resolved here,
    // since the worker walks the path it is given without following any.
    const path = await realpath(options.storedPath);
    const handle = await open(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    return { handle, path, identity: undefined };
  }
  const path = row.host_path ?? '';
  let identity = parseIdentity(row.host_identity);
  const handle = await openPinnedDir(path, { identity, label: `the directory of codebase ${row.id}` });
  if (identity === undefined) {
    identity = await identityOf(handle);
    await options.store.recordIdentity(row.id, identity);
    options.logger.info(
      { codebaseId: row.id, hostPath: path, identity },
      'linked directory identity recorded on first use',
    );
  }
  return { handle, path, identity };
}
