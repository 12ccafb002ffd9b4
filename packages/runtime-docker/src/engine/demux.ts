// Splits an exec's multiplexed stream (Tty false) into stdout and stderr, with backpressure: while either
// side's consumer is behind, the connection is paused, so a command writing faster than its reader blocks
// in the container instead of filling the control plane's memory.
//
// Frame format (Engine API, "Attach to a container" → "Stream format"): an 8-byte header
// [stream, 0, 0, 0, size (uint32 big-endian)] then `size` bytes; stream 1 = stdout, 2 = stderr (0 = stdin
// echo, never sent without a TTY; ignored).
import type { Duplex, Writable } from 'node:stream';

const HEADER_BYTES = 8;

/**
 * Pipes the frames of `socket` into `stdout` and `stderr`, ending both when the socket ends or fails.
 * Resolves then (never rejects).
 */
export function demultiplex(socket: Duplex, stdout: Writable, stderr: Writable): Promise<void> {
  let pending: Buffer = Buffer.alloc(0);
  let waiting = 0;
  const onDrain = (): void => {
    waiting -= 1;
    if (waiting === 0) socket.resume();
  };
  const push = (target: Writable, payload: Buffer): void => {
    if (!target.write(payload)) {
      waiting += 1;
      socket.pause();
      target.once('drain', onDrain);
    }
  };
  socket.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    for (;;) {
      if (pending.length < HEADER_BYTES) break;
      const size = pending.readUInt32BE(4);
      if (pending.length < HEADER_BYTES + size) break;
      const kind = pending[0];
      const payload = pending.subarray(HEADER_BYTES, HEADER_BYTES + size);
      pending = pending.subarray(HEADER_BYTES + size);
      if (size === 0) continue;
      if (kind === 1) push(stdout, payload);
      else if (kind === 2) push(stderr, payload);
    }
  });
  return new Promise((resolve) => {
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      stdout.end();
      stderr.end();
      socket.destroy();
      resolve();
    };
    socket.once('end', finish);
    socket.once('close', finish);
    socket.once('error', finish);
  });
}
