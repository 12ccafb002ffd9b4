// A downloaded file's content as a stream that reads only what its consumer asks for: one chunk per
// read, nothing read ahead (highWaterMark 0). A client that stops reading then holds at most the chunk
// in flight, and the servers' stream budget (api/stream-budget.ts) decides when the next one is read.
import type { FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';

/** Bytes of one read (and so of one downloaded message or write). */
export const FILE_CHUNK_BYTES = 64 * 1024;

/** Reads `file` from its start to its end, a chunk per read; closes it at the end or on destroy. */
export class FileChunks extends Readable {
  readonly #file: FileHandle;

  constructor(file: FileHandle) {
    super({ highWaterMark: 0 });
    this.#file = file;
  }

  override _read(): void {
    const buffer = Buffer.allocUnsafe(FILE_CHUNK_BYTES);
    this.#file.read(buffer, 0, FILE_CHUNK_BYTES, null).then(
      ({ bytesRead }) => void this.push(bytesRead === 0 ? null : buffer.subarray(0, bytesRead)),
      (err: unknown) => this.destroy(err instanceof Error ? err : new Error(String(err))),
    );
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#file.close().then(
      () => callback(err),
      (closeErr: unknown) => callback(err ?? (closeErr as Error)),
    );
  }
}
