// An UNLINK keeps the file's host fd (fs/namespace-ops.ts keepOpenable): a sandbox process may still have
// it open. This opens it without a thread-pool trip where everything it needs is cached.
import { constants } from 'node:fs';
import { RawFile, type HostFile, type WritableFile } from '../host/raw-file.js';
import { resolveIfCached, type DeltaContext } from './context.js';
import { toRel } from './paths.js';

export type KeptFile =
  | { readonly handle: WritableFile; readonly writable: true }
  | { readonly handle: HostFile; readonly writable: false };

/**
 * Delta.openToKeep() done synchronously where the entry and its directory's fd are cached: the sandbox's
 * own (upper) file read-write, a codebase file read-only, both O_NOFOLLOW. Undefined where a step would
 * need the pool or fails: openToKeep() then decides, as before.
 */
export function keepOpenIfCached(ctx: DeltaContext, path: string): KeptFile | undefined {
  const rel = toRel(path);
  try {
    const found = rel === '' ? undefined : resolveIfCached(ctx, rel);
    if (found === undefined || found === null || found.type !== 'file') return undefined;
    if (found.layer === 'upper') {
      const fd = ctx.upper.openSyncIfCached(rel, constants.O_RDWR);
      return fd === undefined ? undefined : { handle: new RawFile(fd), writable: true };
    }
    const fd = ctx.lower.openSyncIfCached(rel, constants.O_RDONLY);
    return fd === undefined ? undefined : { handle: new RawFile(fd), writable: false };
  } catch {
    return undefined; // a name changed behind the worker, or any other failure: the async path reports it
  }
}
