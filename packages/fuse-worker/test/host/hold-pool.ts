// Test helper: every thread of libuv's pool held on a FIFO read, so that work handed to the pool cannot
// run until they are let go. Proves an operation was not done synchronously on the JS thread.
import { execFileSync } from 'node:child_process';
import { closeSync, constants, openSync, read, writeSync } from 'node:fs';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

/**
 * Holds every pool thread (UV_THREADPOOL_SIZE, 4 by default) on a read of its own FIFO under `dir`.
 * Returns the release: one byte into each FIFO, resolving once every read has returned.
 */
export function holdThreadPool(dir: string): () => Promise<void> {
  const size = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
  const fifos = Array.from({ length: size }, (_, i) => {
    const path = join(dir, `pool-fifo-${i}`);
    execFileSync('mkfifo', [path]);
    const fd = openSync(path, constants.O_RDWR);
    onTestFinished(() => closeSync(fd));
    return fd;
  });
  const held = fifos.map(
    (fd) => new Promise<void>((resolve) => read(fd, Buffer.alloc(1), 0, 1, null, () => resolve())),
  );
  let released: Promise<void> | undefined;
  return () => {
    if (released === undefined) {
      for (const fd of fifos) writeSync(fd, 'x');
      released = Promise.all(held).then(() => undefined);
    }
    return released;
  };
}
