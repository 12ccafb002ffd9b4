// Whole-file access for the control plane (library readFile/writeFile): the same rules and audit as
// the sandbox's own syscalls, without going through the kernel.
import { constants, writeSync } from 'node:fs';
import { atLeast } from '@agentfense/protocol';
import { FsError } from '../errors.js';
import type { FsCore } from './core.js';
import { allow, deny } from './decisions.js';
import type { Caller } from './types.js';

/** Reads a whole file as the sandbox would: none => ENOENT, view => EACCES. */
export async function readPath(fs: FsCore, path: string, caller: Caller): Promise<Buffer> {
  const permission = fs.rules.permissionOf(path);
  if (!atLeast(permission, 'read')) {
    throw deny(fs, 'readFile', path, permission, permission === 'none' ? 'ENOENT' : 'EACCES', caller);
  }
  const found = await fs.delta.lookup(path);
  if (found === null) throw new FsError('ENOENT', `${path} does not exist`);
  if (found.type !== 'file') throw new FsError('EISDIR', `${path} is not a regular file`);
  const handle = await fs.delta.openForRead(path);
  try {
    const data = await handle.readFile();
    allow(fs, 'readFile', path, permission, caller);
    return data;
  } finally {
    await handle.close();
  }
}

/** Writes a whole file into the delta as the sandbox would (write permission; parent must exist). */
export async function writePath(fs: FsCore, path: string, data: Uint8Array, caller: Caller): Promise<void> {
  const permission = fs.rules.permissionOf(path);
  if (permission !== 'write') {
    throw deny(fs, 'writeFile', path, permission, permission === 'none' ? 'ENOENT' : 'EACCES', caller);
  }
  const found = await fs.delta.lookup(path);
  if (found !== null && found.type !== 'file') throw new FsError('EISDIR', `${path} is not a regular file`);
  let exists = found !== null;
  for (;;) {
    const epoch = fs.delta.layerEpoch;
    const handle = exists
      ? await fs.delta.openForWrite(path, constants.O_RDWR | constants.O_TRUNC)
      : await fs.delta.create(path, 0o644, constants.O_RDWR | constants.O_TRUNC);
    exists = true;
    try {
      const quota = fs.delta.quota;
      if (quota !== null) {
        await quota.whenReady();
        const st = await handle.stat({ bigint: true });
        quota.check(st.ino, data.byteLength, path);
      }
      // A checkpoint that began since the open may have frozen this file: never write into it; open the
      // path again (a copy in the new writable layer). From here to the end of the data, no await.
      if (epoch !== fs.delta.layerEpoch) continue;
      for (let done = 0; done < data.byteLength;) {
        done += writeSync(handle.fd, data, done, data.byteLength - done, done);
      }
      if (quota !== null) quota.record(await handle.stat({ bigint: true }));
      break;
    } finally {
      await handle.close();
    }
  }
  allow(fs, 'writeFile', path, permission, caller);
  // The kernel may hold this file's old pages or a negative entry for its name: drop them.
  await fs.invalidateAll();
}
