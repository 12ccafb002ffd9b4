// Bytes → shell text that the session shell reads back byte for byte. Quoting bugs here would let a
// command's text escape into the protocol, so both encoders are total over their input and unit-tested.

const SINGLE_QUOTE = 0x27;
/** `'\''`: close the quote, an escaped quote, reopen. */
const ESCAPED_QUOTE = Buffer.from("'\\''");

/**
 * `'…'` around `bytes`, each `'` written as `'\''`. Inside single quotes a POSIX shell takes every byte
 * literally (newlines, `\`, `$`, bytes ≥ 0x80 included), so this is exact for anything without NUL —
 * which no shell string can hold; callers reject it first.
 */
export function singleQuote(bytes: Uint8Array): Buffer {
  const parts: Uint8Array[] = [Buffer.from("'")];
  let start = 0;
  for (let i = 0; i < bytes.length; i += 1) {
    if (bytes[i] !== SINGLE_QUOTE) continue;
    parts.push(bytes.subarray(start, i), ESCAPED_QUOTE);
    start = i + 1;
  }
  parts.push(bytes.subarray(start), Buffer.from("'"));
  return Buffer.concat(parts);
}

/**
 * A printf format that prints exactly `bytes` (NUL included). Printable ASCII stays as it is, except `%`
 * (a conversion), `\` (an escape), `'` (so the result can sit in single quotes) and `-` (a leading one
 * would read as an option); everything else becomes a three-digit octal escape, which dash's, bash's and
 * busybox's printf all read as one byte. The result is pure ASCII with no newline.
 */
export function printfFormat(bytes: Uint8Array): string {
  let out = '';
  for (const byte of bytes) {
    if (byte === 0x25) out += '%%';
    else if (byte >= 0x20 && byte <= 0x7e && byte !== 0x5c && byte !== 0x27 && byte !== 0x2d) {
      out += String.fromCharCode(byte);
    } else out += `\\${byte.toString(8).padStart(3, '0')}`;
  }
  return out;
}
