// MCP over stdio with a per-message size limit that refuses instead of closing. The SDK's
// StdioServerTransport buffers at most 10 MiB and, past it, closes the transport without an answer:
// `agentfense mcp` then ends and destroys the sandbox with the agent's changes. Here a line longer than
// the limit is skipped up to its newline (never held in memory), answered with a JSON-RPC error naming
// the limit, and the next line is read as usual.
import type { Readable, Writable } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { MCP_MAX_MESSAGE_BYTES, requestId, tooLargeAnswer } from './message-limit.js';

/** Bytes kept of an oversized message's start and end, to find its id. */
const HEAD_BYTES = 4096;
const TAIL_BYTES = 4096;
const NEWLINE = 0x0a;

export interface LimitedStdioOptions {
  readonly stdin: Readable;
  readonly stdout: Writable;
  /** Largest message (bytes, without its newline); default MCP_MAX_MESSAGE_BYTES. */
  readonly maxMessageBytes?: number;
}

/** An oversized line being skipped: its size so far, its first bytes, its last bytes. */
interface Skipping {
  bytes: number;
  head: Buffer;
  tail: Buffer;
}

/** Newline-delimited JSON-RPC on a pair of streams, as the SDK's stdio transport, with the limit above. */
export class LimitedStdioServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  readonly #stdin: Readable;
  readonly #stdout: Writable;
  readonly #max: number;
  #pieces: Buffer[] = [];
  #size = 0;
  #skipping: Skipping | undefined;
  #started = false;

  constructor(options: LimitedStdioOptions) {
    this.#stdin = options.stdin;
    this.#stdout = options.stdout;
    this.#max = options.maxMessageBytes ?? MCP_MAX_MESSAGE_BYTES;
  }

  start(): Promise<void> {
    if (this.#started) return Promise.reject(new Error('LimitedStdioServerTransport already started'));
    this.#started = true;
    this.#stdin.on('data', this.#onData);
    this.#stdin.on('error', this.#onError);
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.#stdin.off('data', this.#onData);
    this.#stdin.off('error', this.#onError);
    if (this.#stdin.listenerCount('data') === 0) this.#stdin.pause();
    this.#pieces = [];
    this.#skipping = undefined;
    this.onclose?.();
    return Promise.resolve();
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((done) => {
      if (this.#stdout.write(`${JSON.stringify(message)}\n`)) done();
      else this.#stdout.once('drain', done);
    });
  }

  readonly #onError = (error: Error): void => this.onerror?.(error);

  readonly #onData = (chunk: Buffer): void => {
    let at = 0;
    while (at < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, at);
      const piece = chunk.subarray(at, newline < 0 ? chunk.length : newline);
      this.#take(piece);
      if (newline < 0) return;
      this.#endOfLine();
      at = newline + 1;
    }
  };

  /** Adds part of the current line: kept while under the limit, else only counted (head and tail kept). */
  #take(piece: Buffer): void {
    const skipping = this.#skipping;
    if (skipping !== undefined) {
      skipping.bytes += piece.length;
      skipping.tail = Buffer.concat([skipping.tail, piece]).subarray(-TAIL_BYTES);
      return;
    }
    if (this.#size + piece.length <= this.#max) {
      // A copy: the chunk's buffer may be reused by the stream.
      this.#pieces.push(Buffer.from(piece));
      this.#size += piece.length;
      return;
    }
    const all = Buffer.concat([...this.#pieces, piece]);
    this.#skipping = {
      bytes: all.length,
      head: Buffer.from(all.subarray(0, HEAD_BYTES)),
      tail: Buffer.from(all.subarray(-TAIL_BYTES)),
    };
    this.#pieces = [];
    this.#size = 0;
  }

  #endOfLine(): void {
    const skipping = this.#skipping;
    if (skipping !== undefined) {
      this.#skipping = undefined;
      this.#refuse(skipping);
      return;
    }
    const line = Buffer.concat(this.#pieces).toString('utf8').replace(/\r$/, '');
    this.#pieces = [];
    this.#size = 0;
    if (line.trim() === '') return;
    let message: JSONRPCMessage;
    try {
      message = JSONRPCMessageSchema.parse(JSON.parse(line));
    } catch (err) {
      this.onerror?.(err as Error);
      return;
    }
    this.onmessage?.(message);
  }

  #refuse(skipped: Skipping): void {
    const id = requestId(skipped.head.toString('utf8'), skipped.tail.toString('utf8').replace(/\r$/, ''));
    this.onerror?.(new Error(`refused an MCP message of ${skipped.bytes} bytes (limit ${this.#max})`));
    void this.send(tooLargeAnswer(id, this.#max));
  }
}
