// FIFOs and socket nodes, which Node cannot make with a syscall of its own (it has no mknod for them):
// made from a directory fd HostDir holds and one name in it, so nothing on the way follows a symlink.
import { execFile } from 'node:child_process';
import fsp from 'node:fs/promises';
import { createServer } from 'node:net';
import { promisify } from 'node:util';

import { fdPath } from './flags.js';
import { randomHex } from './random-hex.js';

const execFileAsync = promisify(execFile);

/** mkfifo(3) through the coreutils binary; the child sees our fds through /proc/<our pid>. */
export async function makeFifo(dirFd: number, name: string, mode: number): Promise<void> {
  const target = `/proc/${process.pid}/fd/${dirFd}/${name}`;
  await execFileAsync('mkfifo', ['-m', (mode & 0o7777).toString(8), '--', target]).catch((err: unknown) => {
    throw Object.assign(new Error(`mkfifo failed: ${String(err)}`), { code: 'EIO' });
  });
}

/**
 * A Unix socket node at `at` (the magic-link path of `name` in `dirFd`): binds a listening socket and
 * closes it. libuv unlinks the bound path on close, so the node is first hard-linked to `at` from a
 * temporary name in the same directory, which close then removes. Names must be short (sun_path holds
 * 107 bytes).
 */
export async function makeSocket(dirFd: number, at: string, mode: number): Promise<void> {
  const tmp = `${fdPath(dirFd)}/.af-sock-${randomHex(8)}`;
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(tmp, () => resolve());
  });
  try {
    await fsp.link(tmp, at);
    await fsp.chmod(at, mode & 0o7777);
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
