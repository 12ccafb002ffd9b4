// Response bodies written with back-pressure (api/stream-budget.ts) on the HTTP face: a download read a
// chunk at a time as the response takes it, and NDJSON lines whose writes wait while the client does not
// read. A client that takes nothing for the stall time has its connection closed (a download) or its
// stream ended with an error line and closed one stall time later (exec/stream).
import { Readable } from 'node:stream';
import type { PacedStream } from '../api/stream-budget.js';

/**
 * `source`'s chunks as a response body: each chunk is read only once the response took the previous one
 * (pipe asks for more only then) and the budget has room; `paced` is closed when the body ends or is
 * destroyed (a client gone, a stall).
 */
export function pacedBody(source: Readable, paced: PacedStream): Readable {
  const chunks = source[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  let taken: (() => void) | undefined;
  let room: Promise<void> | undefined;
  const body = new Readable({
    highWaterMark: 0,
    read() {
      taken?.();
      taken = undefined;
      void (async () => {
        await room;
        const next = await chunks.next();
        if (next.done === true) {
          body.push(null);
          return;
        }
        room = paced.write(next.value.length, (done) => (taken = done));
        body.push(next.value);
      })().catch((err: unknown) => body.destroy(err instanceof Error ? err : new Error(String(err))));
    },
    destroy(err, callback) {
      paced.close();
      source.destroy();
      callback(err);
    },
  });
  body.once('end', () => paced.close());
  return body;
}
