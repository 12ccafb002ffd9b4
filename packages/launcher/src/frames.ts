// The af-init wire protocol v2 (the C side: native/af-init.c): frames of
// `u32 LE length (of what follows) · u8 type · u32 LE id · payload`. Encoding checks what we send; the
// decoder treats af-init as untrusted (it runs with the agent's uid inside the sandbox; it is not
// dumpable, but nothing the host does may depend on that): a length out of range fails at once, so a
// hostile peer cannot make the host buffer more than one frame.
import { InvalidArgumentError, ProtocolError } from '@agentfense/protocol';

/** The protocol version af-init announces in READY. */
export const AF_INIT_PROTOCOL_VERSION = 2;
/** The largest value of a frame's length field (type + id + payload). */
export const AF_INIT_MAX_FRAME_LENGTH = 1024 * 1024 + 16;
/** The largest payload of a STDOUT/STDERR frame. */
export const AF_INIT_MAX_OUTPUT_CHUNK = 64 * 1024;
/** The largest STDIN payload the client puts in one frame. */
export const AF_INIT_MAX_STDIN_CHUNK = 1024 * 1024;
/** Bytes in front of a payload: length, type, id. */
const HEADER_BYTES = 9;

/** Frame types; host → af-init below 10, af-init → host from 10. */
export const LauncherFrameType = {
  SPAWN: 1,
  STDIN: 2,
  SIGNAL: 3,
  PING: 4,
  /** Stop reading a command's output: its consumer is behind (the command then blocks on its pipe). */
  PAUSE: 5,
  /** Read a paused command's output again. */
  RESUME: 6,
  READY: 10,
  STARTED: 11,
  FAILED: 12,
  STDOUT: 13,
  STDERR: 14,
  EXIT: 15,
  PONG: 16,
} as const;

/** One decoded frame. */
export interface LauncherFrame {
  readonly type: number;
  readonly id: number;
  readonly payload: Buffer;
}

/** Encodes one frame. `id` is a u32; the payload must keep the length within the protocol's maximum. */
export function encodeLauncherFrame(type: number, id: number, payload: Uint8Array = Buffer.alloc(0)): Buffer {
  const length = 5 + payload.byteLength;
  if (length > AF_INIT_MAX_FRAME_LENGTH) {
    throw new InvalidArgumentError(
      `an af-init frame of ${length} bytes exceeds the protocol's ${AF_INIT_MAX_FRAME_LENGTH}`,
    );
  }
  const frame = Buffer.allocUnsafe(HEADER_BYTES + payload.byteLength);
  frame.writeUInt32LE(length, 0);
  frame.writeUInt8(type, 4);
  frame.writeUInt32LE(id, 5);
  frame.set(payload, HEADER_BYTES);
  return frame;
}

/** What a SPAWN carries. */
export interface SpawnPayload {
  readonly argv: readonly string[];
  readonly cwd: string;
  /** The complete environment as `K=V` entries (af-init adds nothing). */
  readonly env: readonly string[];
  /** true: stdin is a pipe fed by STDIN frames; false: /dev/null. */
  readonly stdinPipe: boolean;
}

function checkString(value: string, what: string): void {
  if (value.includes('\0'))
    throw new InvalidArgumentError(`${what} contains a NUL byte: ${JSON.stringify(value)}`);
}

/** Encodes a SPAWN payload; throws InvalidArgumentError on what af-init could not carry. */
export function encodeSpawnPayload(spawn: SpawnPayload): Buffer {
  if (spawn.argv.length === 0) throw new InvalidArgumentError('argv must name a program (it is empty)');
  checkString(spawn.cwd, 'cwd');
  spawn.argv.forEach((arg, i) => checkString(arg, `argv[${i}]`));
  for (const entry of spawn.env) {
    checkString(entry, 'an environment entry');
    if (entry.indexOf('=') < 1) {
      throw new InvalidArgumentError(
        `environment entries are K=V with a non-empty K (got ${JSON.stringify(entry)})`,
      );
    }
  }
  const head = Buffer.alloc(12);
  head.writeUInt32LE(spawn.stdinPipe ? 1 : 0, 0);
  head.writeUInt32LE(spawn.argv.length, 4);
  head.writeUInt32LE(spawn.env.length, 8);
  const strings = [spawn.cwd, ...spawn.argv, ...spawn.env].map((s) => Buffer.from(`${s}\0`));
  return Buffer.concat([head, ...strings]);
}

/**
 * Reassembles frames from a byte stream cut anywhere. Once it has thrown it stays failed (the stream
 * position is lost).
 */
export class LauncherFrameDecoder {
  #buffer: Buffer = Buffer.alloc(0);
  #failure: ProtocolError | undefined;

  /** Appends `chunk`; returns every frame completed by it. Throws ProtocolError on a bad length. */
  push(chunk: Buffer): LauncherFrame[] {
    if (this.#failure) throw this.#failure;
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const frames: LauncherFrame[] = [];
    let at = 0;
    while (this.#buffer.length - at >= 4) {
      const length = this.#buffer.readUInt32LE(at);
      if (length < 5 || length > AF_INIT_MAX_FRAME_LENGTH) {
        this.#failure = new ProtocolError(
          `af-init sent a frame length of ${length} (allowed 5..${AF_INIT_MAX_FRAME_LENGTH})`,
        );
        throw this.#failure;
      }
      if (this.#buffer.length - at < 4 + length) break;
      frames.push({
        type: this.#buffer.readUInt8(at + 4),
        id: this.#buffer.readUInt32LE(at + 5),
        payload: this.#buffer.subarray(at + HEADER_BYTES, at + 4 + length),
      });
      at += 4 + length;
    }
    // Keep only the unfinished tail; copy it so a large consumed buffer is not pinned by a small tail.
    this.#buffer = at === 0 ? this.#buffer : Buffer.from(this.#buffer.subarray(at));
    return frames;
  }
}
