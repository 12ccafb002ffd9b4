// The read-only host file behind a data op, opened without blocking the mount's JS thread.
import { closeSync, constants, fstatSync } from 'node:fs';

import { FsError } from '../errors.js';
import { RawFile, type HostFile } from '../host/raw-file.js';
import { mustResolve, type DeltaContext } from './context.js';
import { toRel } from './paths.js';

/**
 * Opens the serving layer's file read-only for the worker's data ops: synchronously when the host
 * layer has the parent directory's fd cached (a RawFile), else through the thread pool. Only a regular
 * file: the kernel may still hold a node for a name that is now a FIFO or device (a discard, a change
 * behind the mount), and opening one of those could block the mount's only JS thread. O_NONBLOCK
 * makes that open return at once, and the fstat after it closes the check-then-open race.
 */
export async function openReadHandleAt(ctx: DeltaContext, path: string): Promise<HostFile> {
  const rel = toRel(path);
  const found = await mustResolve(ctx, rel);
  if (found.type !== 'file') throw new FsError('EIO', `${path} is no longer a regular file`);
  const layer = found.layer === 'upper' ? ctx.upper : ctx.lower;
  const flags = constants.O_RDONLY | constants.O_NONBLOCK;
  const fd = layer.openSyncIfCached(rel, flags);
  if (fd !== undefined) {
    if (!fstatSync(fd).isFile()) {
      closeSync(fd);
      throw new FsError('EIO', `${path} is no longer a regular file`);
    }
    return new RawFile(fd);
  }
  const handle = await layer.open(rel, flags);
  if (!(await handle.stat()).isFile()) {
    await handle.close();
    throw new FsError('EIO', `${path} is no longer a regular file`);
  }
  return handle;
}
