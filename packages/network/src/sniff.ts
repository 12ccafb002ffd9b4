// Reads the name a connection's first bytes claim: the server name of a TLS ClientHello (SNI) or the
// Host of a plain HTTP/1 request. Pure functions over the bytes received so far: `more` means wait.

export type Sniffed =
  | { readonly kind: 'more' }
  | { readonly kind: 'tls'; readonly name?: string }
  | { readonly kind: 'http'; readonly name?: string; readonly method: string }
  | { readonly kind: 'other' };

/** The most bytes read before a decision: a ClientHello with post-quantum key shares is ~2 KiB. */
export const SNIFF_LIMIT = 16 * 1024;

const METHOD_START = /^[A-Z]{1,20} /;

export function sniff(data: Buffer): Sniffed {
  if (data.length === 0) return { kind: 'more' };
  if (data[0] === 0x16) return sniffTls(data);
  const head = data.subarray(0, 21).toString('latin1');
  if (METHOD_START.test(head) || (data.length < 21 && /^[A-Z]+$/.test(head))) return sniffHttp(data);
  return { kind: 'other' };
}

function normalizeName(raw: string): string | undefined {
  const name = raw.trim().toLowerCase().replace(/\.$/, '');
  return /^[a-z0-9._-]{1,253}$/.test(name) ? name : undefined;
}

function sniffHttp(data: Buffer): Sniffed {
  const end = data.indexOf('\r\n\r\n');
  if (end === -1) return data.length >= SNIFF_LIMIT ? { kind: 'other' } : { kind: 'more' };
  const lines = data.subarray(0, end).toString('latin1').split('\r\n');
  const method = (lines[0] ?? '').split(' ')[0] ?? '';
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === 'host') {
      const value = line.slice(colon + 1).trim();
      // Host may carry a port (`example.com:8080`, `[::1]:80`): the name is what precedes it.
      const host = value.startsWith('[') ? value.slice(1, value.indexOf(']')) : (value.split(':')[0] ?? '');
      const name = normalizeName(host);
      return name === undefined ? { kind: 'http', method } : { kind: 'http', name, method };
    }
  }
  return { kind: 'http', method };
}

/** Walks the handshake records' payload; a ClientHello may span several records. */
function sniffTls(data: Buffer): Sniffed {
  const chunks: Buffer[] = [];
  let offset = 0;
  while (offset + 5 <= data.length) {
    if (data[offset] !== 0x16) return { kind: 'tls' };
    const length = data.readUInt16BE(offset + 3);
    const body = data.subarray(offset + 5, offset + 5 + length);
    chunks.push(body);
    offset += 5 + length;
    const hello = Buffer.concat(chunks);
    if (hello.length >= 4) {
      if (hello[0] !== 0x01) return { kind: 'tls' };
      const total = 4 + hello.readUIntBE(1, 3);
      if (hello.length >= total) return { kind: 'tls', ...serverName(hello.subarray(4, total)) };
    }
    if (body.length < length) break;
  }
  return data.length >= SNIFF_LIMIT ? { kind: 'tls' } : { kind: 'more' };
}

function serverName(hello: Buffer): { name?: string } {
  try {
    let p = 2 + 32; // version, random
    p += 1 + (hello[p] ?? 0); // session id
    p += 2 + hello.readUInt16BE(p); // cipher suites
    p += 1 + (hello[p] ?? 0); // compression methods
    const end = p + 2 + hello.readUInt16BE(p);
    p += 2;
    while (p + 4 <= end) {
      const type = hello.readUInt16BE(p);
      const length = hello.readUInt16BE(p + 2);
      p += 4;
      if (type === 0) {
        // server_name_list: list length, then entries of (type 0 = host_name, length, name).
        let q = p + 2;
        while (q + 3 <= p + length) {
          const nameType = hello[q];
          const nameLength = hello.readUInt16BE(q + 1);
          if (nameType === 0) {
            const name = normalizeName(hello.subarray(q + 3, q + 3 + nameLength).toString('latin1'));
            return name === undefined ? {} : { name };
          }
          q += 3 + nameLength;
        }
        return {};
      }
      p += length;
    }
  } catch {
    // A truncated or malformed hello: no name.
  }
  return {};
}
