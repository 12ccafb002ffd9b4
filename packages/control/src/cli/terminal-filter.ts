// A command's output on the operator's terminal (`run`, `shell`, `session exec`): the sandbox chose those
// bytes, and a terminal obeys more than colours. OSC sets the title or writes the clipboard (OSC 52), DCS,
// APC, PM and SOS reach terminal-specific handlers, CSI moves the cursor, clears the screen or answers
// queries. Text and colours (SGR, `ESC [ … m`) pass; every other escape, control and C1 character is shown
// as a `\x1b`-style escape, which makes what follows it plain text. A pipe or file gets the raw bytes
// (the caller decides: see `terminalWriter`), and so does a terminal with `--raw-output`.

const ESC = 0x1b;
/** A CSI longer than this is no colour: shown escaped. */
const MAX_CSI = 64;
const NAMED: Readonly<Record<number, string>> = {
  0x07: '\\a',
  0x08: '\\b',
  0x0b: '\\v',
  0x0c: '\\f',
};

function escapeByte(byte: number): string {
  return NAMED[byte] ?? `\\x${byte.toString(16).padStart(2, '0')}`;
}

/** Whether a byte is an SGR parameter: digits, `;` and `:` (colon-separated colours). */
function isSgrParameter(byte: number): boolean {
  return (byte >= 0x30 && byte <= 0x39) || byte === 0x3b || byte === 0x3a;
}

/** One stream's filter: state carries across chunks, so a sequence split between two is still seen. */
export class TerminalFilter {
  /** Bytes of an escape sequence being read (ESC, or ESC [ and its parameters). */
  #sequence: number[] = [];
  /** A UTF-8 lead byte 0xC2 held back: with 0x80-0x9F it is a C1 control (U+0080-U+009F). */
  #c2 = false;
  /** Continuation bytes the current UTF-8 character still needs. */
  #continuation = 0;

  /** The terminal-safe form of a chunk. */
  push(chunk: Uint8Array): Buffer {
    const out: (Uint8Array | string)[] = [];
    let start = 0;
    const flush = (end: number): void => {
      if (end > start) out.push(chunk.subarray(start, end));
    };
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i]!;
      const fast =
        this.#sequence.length === 0 &&
        !this.#c2 &&
        this.#continuation === 0 &&
        ((byte >= 0x20 && byte < 0x7f) || byte === 0x0a || byte === 0x09 || byte === 0x0d);
      if (fast) continue;
      flush(i);
      start = i + 1;
      const kept = this.#step(byte, out);
      if (kept) out.push(chunk.subarray(i, i + 1));
    }
    flush(chunk.length);
    return Buffer.concat(out.map((part) => (typeof part === 'string' ? Buffer.from(part) : part)));
  }

  /** What is held back at the end of the stream, shown escaped. */
  end(): Buffer {
    const out: (Uint8Array | string)[] = [];
    this.#dropSequence(out);
    if (this.#c2) out.push('\\xc2');
    this.#c2 = false;
    return Buffer.concat(out.map((part) => (typeof part === 'string' ? Buffer.from(part) : part)));
  }

  /** Handles one byte outside the fast path; true when the byte itself is to be written as it is. */
  #step(byte: number, out: (Uint8Array | string)[]): boolean {
    const seq = this.#sequence;
    if (seq.length === 1) {
      if (byte === 0x5b) {
        seq.push(byte); // ESC [: a CSI, a colour perhaps
        return false;
      }
      this.#dropSequence(out); // any other escape: ESC shown, the rest is text
      return this.#step(byte, out);
    }
    if (seq.length > 1) {
      if (byte >= 0x20 && byte <= 0x3f && seq.length < MAX_CSI) {
        seq.push(byte);
        return false;
      }
      if (byte === 0x6d && seq.slice(2).every(isSgrParameter)) {
        out.push(Uint8Array.from([...seq, byte])); // SGR: colours and text attributes pass
        this.#sequence = [];
        return false;
      }
      if (byte >= 0x40 && byte <= 0x7e) {
        this.#dropSequence(out);
        out.push(String.fromCharCode(byte));
        return false;
      }
      this.#dropSequence(out);
      return this.#step(byte, out);
    }
    if (this.#c2) {
      this.#c2 = false;
      if (byte >= 0x80 && byte <= 0x9f) {
        out.push(`\\u00${byte.toString(16)}`); // a C1 control: 8-bit CSI, OSC, DCS, …
        return false;
      }
      out.push(Uint8Array.from([0xc2]));
      return this.#step(byte, out);
    }
    return this.#text(byte, out);
  }

  /** A byte of text: UTF-8 passes, controls and stray bytes are shown escaped. */
  #text(byte: number, out: (Uint8Array | string)[]): boolean {
    if (byte >= 0x80 && byte <= 0xbf) {
      if (this.#continuation > 0) {
        this.#continuation--;
        return true;
      }
      out.push(escapeByte(byte)); // a continuation byte without its lead (a lone 0x9b is CSI to some)
      return false;
    }
    this.#continuation = 0;
    if (byte === ESC) {
      this.#sequence = [ESC];
      return false;
    }
    if (byte === 0x0a || byte === 0x09 || byte === 0x0d || (byte >= 0x20 && byte < 0x7f)) return true;
    if (byte === 0xc2) {
      this.#c2 = true;
      this.#continuation = 1;
      return false;
    }
    if (byte >= 0xc3 && byte <= 0xf4) {
      this.#continuation = byte < 0xe0 ? 1 : byte < 0xf0 ? 2 : 3;
      return true;
    }
    out.push(escapeByte(byte)); // C0 controls, DEL, bytes no UTF-8 text holds
    return false;
  }

  /** The sequence read so far, shown escaped (ESC as `\x1b`, the rest as the text it is). */
  #dropSequence(out: (Uint8Array | string)[]): void {
    if (this.#sequence.length === 0) return;
    out.push(`\\x1b${String.fromCharCode(...this.#sequence.slice(1))}`);
    this.#sequence = [];
  }
}

/** Where output goes, as `io.stdout` / `io.stderr` are. */
interface Writable {
  write(chunk: string | Uint8Array): unknown;
}

/** A writer for one stream: filtered when `filter` (a terminal without --raw-output), else the raw bytes. */
export function terminalWriter(
  stream: Writable,
  filter: boolean,
): { write(chunk: Uint8Array | string): void; end(): void } {
  if (!filter) return { write: (chunk) => void stream.write(chunk), end: () => {} };
  const f = new TerminalFilter();
  return {
    write: (chunk) => {
      const safe = f.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
      if (safe.length > 0) stream.write(safe);
    },
    end: () => {
      const rest = f.end();
      if (rest.length > 0) stream.write(rest);
    },
  };
}
