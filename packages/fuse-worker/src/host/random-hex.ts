// Random hex for temporary names and cursors, read from /dev/urandom. Why not `crypto.randomBytes`: loading
// the `crypto` module sets up OpenSSL, ~0.7 MiB of private memory in every worker process (measured on
// Node 20: a bare process 6.2 -> 6.9 MiB), for a few random bytes now and then. Only uniqueness is needed
// (temporary names in the delta, continuation cursors on the control connection); the kernel's CSPRNG
// gives that and unpredictability too.
import { closeSync, openSync, readSync } from 'node:fs';

const POOL_BYTES = 256;
const pool = Buffer.allocUnsafeSlow(POOL_BYTES);
/** Bytes of `pool` not handed out yet (its last `left` bytes). Each byte is handed out once. */
let left = 0;

/** `bytes` random bytes (at most 256) as lowercase hex. */
export function randomHex(bytes: number): string {
  if (!Number.isInteger(bytes) || bytes < 1 || bytes > POOL_BYTES) {
    throw new RangeError(`randomHex: 1 to ${POOL_BYTES} bytes, not ${bytes}`);
  }
  if (left < bytes) refill();
  const start = POOL_BYTES - left;
  left -= bytes;
  return pool.toString('hex', start, start + bytes);
}

function refill(): void {
  const fd = openSync('/dev/urandom', 'r');
  try {
    for (let got = 0; got < POOL_BYTES;) got += readSync(fd, pool, got, POOL_BYTES - got, null);
  } finally {
    closeSync(fd);
  }
  left = POOL_BYTES;
}
