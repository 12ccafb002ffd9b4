// Splits the wrapper's session header off a command's stderr (see WRAPPER_SCRIPT in args.ts).
//
// The container side writes `AGENTFENSE-SESSION=<pid>\n` before anything else, so the header is the first
// thing of the command's stderr; the command cannot forge it because only the first one counts. Whatever
// the docker CLI itself prints before it (warnings about its config file, say) is not the command's output:
// it is kept aside as `preamble` for logging. If the stream ends without a header, the wrapper never ran
// and everything is the CLI's (or the engine's) error message.
import { Transform } from 'node:stream';
import type { TransformCallback } from 'node:stream';
import { SESSION_HEADER_PREFIX } from './args.js';

/** The most bytes held back while waiting for the header (the CLI's own chatter is far shorter). */
const MAX_PREAMBLE_BYTES = 64 * 1024;

const PREFIX = Buffer.from(SESSION_HEADER_PREFIX);

/** A stderr pass-through that resolves `session` with the header's pid and drops the header itself. */
export class SessionHeaderParser extends Transform {
  /** The command's session id (pid inside the container), or null when no header came. */
  readonly session: Promise<number | null>;
  #resolve!: (session: number | null) => void;
  #held: Buffer = Buffer.alloc(0);
  #done = false;
  /** What came before the header (the docker CLI's own messages); empty in the normal case. */
  preamble: Buffer = Buffer.alloc(0);

  constructor() {
    super();
    this.session = new Promise((resolve) => {
      this.#resolve = resolve;
    });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.#done) {
      callback(null, chunk);
      return;
    }
    this.#held = Buffer.concat([this.#held, chunk]);
    const at = this.#held.indexOf(PREFIX);
    if (at >= 0) {
      const end = this.#held.indexOf(0x0a, at + PREFIX.length);
      if (end >= 0) {
        const digits = this.#held.subarray(at + PREFIX.length, end).toString('latin1');
        if (/^[1-9]\d{0,9}$/.test(digits)) {
          this.preamble = this.#held.subarray(0, at);
          const rest = this.#held.subarray(end + 1);
          this.#finish(Number(digits));
          callback(null, rest.length > 0 ? rest : undefined);
          return;
        }
        // Not our header after all: give up looking and pass everything through.
        this.#giveUp(callback);
        return;
      }
    }
    if (this.#held.length > MAX_PREAMBLE_BYTES) {
      this.#giveUp(callback);
      return;
    }
    callback();
  }

  override _flush(callback: TransformCallback): void {
    if (!this.#done) {
      const held = this.#held;
      this.#finish(null);
      if (held.length > 0) this.push(held);
    }
    callback();
  }

  #giveUp(callback: TransformCallback): void {
    const held = this.#held;
    this.#finish(null);
    callback(null, held);
  }

  #finish(session: number | null): void {
    this.#done = true;
    this.#held = Buffer.alloc(0);
    this.#resolve(session);
  }
}
