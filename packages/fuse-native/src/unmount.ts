// Unmounting through fusermount: argv arrays, no shell.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** `fusermount3 -u -- <mountpoint>` (-uz if lazy), falling back to fuse 2's `fusermount`. */
export async function runUnmount(mountpoint: string, lazy: boolean): Promise<void> {
  const args = [lazy ? '-uz' : '-u', '--', mountpoint];
  try {
    // libfuse 3 ships `fusermount3`; some systems only have fuse 2's `fusermount`.
    await run('fusermount3', args).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return run('fusermount', args);
      throw err;
    });
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new Error(`unmounting ${mountpoint} failed: ${(e.stderr || e.message || '').trim()}`, {
      cause: err,
    });
  }
}
