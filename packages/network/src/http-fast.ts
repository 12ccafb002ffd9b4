// The first plain-HTTP request of a connection without Node's HTTP stack: its head is parsed here, and
// once it is decided allowed, a head rebuilt from the parsed fields goes to the destination and the
// answer's bytes go back as they come, unparsed. Node's HTTP server and client cost ~0.4 ms of a new
// connection's first byte on this machine; this path costs one parse of the head. Only what it can carry
// exactly takes it: a complete HTTP/1.1 head with no body, no upgrade, nothing after it. Everything else
// (a body, a refusal's 403, a malformed head, a second request) goes to Node's HTTP server as before.
// A CONNECT head alone is read here too and goes straight to the tunnel's decision.
import type { Socket } from 'node:net';
import type { FlowContext, Tracked } from './context.js';
import type { Decision, Destination } from './decide.js';

/** How long the first head may take before Node's HTTP server takes the connection (and its timeouts). */
const HEAD_WAIT_MS = 2_000;
/** A head longer than this goes to Node's HTTP server. */
const HEAD_LIMIT = 16 * 1024;
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Headers of one hop that a proxy never passes on (RFC 9110 §7.6.1), as lower-case names. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'proxy-connection',
  'proxy-authorization',
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'upgrade',
]);

export interface RequestHead {
  readonly method: string;
  readonly url: string;
  /** Raw name/value pairs, as Node's `rawHeaders`. */
  readonly rawHeaders: readonly string[];
  readonly host: string | undefined;
}

/** Whether a head holds a control character (a bare CR or LF included) other than tab and its CRLFs. */
function hasControl(text: string): boolean {
  const lines = text.replaceAll('\r\n', '');
  for (let i = 0; i < lines.length; i++) {
    const code = lines.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09) || code === 0x7f) return true;
  }
  return false;
}

/**
 * Reads a connection's bytes until the end of its first head (or the limit, the end, the deadline);
 * the socket is left paused with nothing of it consumed but `bytes`.
 */
export function readHead(client: Socket): Promise<Buffer> {
  return new Promise((resolve) => {
    let bytes: Buffer = Buffer.alloc(0);
    const done = (): void => {
      clearTimeout(timer);
      client.off('data', onData);
      client.off('end', done);
      client.off('error', done);
      client.pause();
      resolve(bytes);
    };
    const onData = (chunk: Buffer): void => {
      bytes = bytes.length === 0 ? chunk : Buffer.concat([bytes, chunk]);
      if (bytes.includes('\r\n\r\n') || bytes.length >= HEAD_LIMIT) done();
    };
    const timer = setTimeout(done, HEAD_WAIT_MS);
    client.on('data', onData);
    client.once('end', done);
    client.once('error', done);
    client.resume();
  });
}

/**
 * The request this path may carry, or null: an exact HTTP/1.1 head (CRLF lines, token names, no folded
 * or control characters, one Host) of a request without a body or upgrade, and no byte after it.
 */
export function parseSimpleRequest(bytes: Buffer): RequestHead | null {
  const end = bytes.indexOf('\r\n\r\n');
  if (end === -1 || end + 4 !== bytes.length) return null;
  const text = bytes.subarray(0, end).toString('latin1');
  // Control characters (bare CR or LF included) anywhere but the line ends: Node's parser decides.
  if (hasControl(text)) return null;
  const [requestLine = '', ...lines] = text.split('\r\n');
  const m = /^([A-Z]{1,20}) (\S+) HTTP\/1\.1$/.exec(requestLine);
  if (m === null || m[1] === 'CONNECT') return null;
  const rawHeaders: string[] = [];
  let host: string | undefined;
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon) : '';
    if (!TOKEN.test(name)) return null;
    const value = line.slice(colon + 1).trim();
    const key = name.toLowerCase();
    if (key === 'transfer-encoding' || key === 'upgrade' || key === 'expect') return null;
    if (key === 'content-length' && value !== '0') return null;
    if (key === 'host') {
      if (host !== undefined) return null;
      host = value;
    }
    rawHeaders.push(name, value);
  }
  return { method: m[1] ?? '', url: m[2] ?? '', rawHeaders, host };
}

/**
 * The authority of a CONNECT head with nothing after it (the tunnel's bytes come once it is answered),
 * or null: the same exact head as `parseSimpleRequest` takes, without its limits on headers.
 */
export function connectAuthority(bytes: Buffer): string | null {
  if (!bytes.subarray(0, 8).equals(Buffer.from('CONNECT '))) return null;
  const end = bytes.indexOf('\r\n\r\n');
  if (end === -1 || end + 4 !== bytes.length) return null;
  const text = bytes.subarray(0, end).toString('latin1');
  if (hasControl(text)) return null;
  const [requestLine = '', ...lines] = text.split('\r\n');
  const m = /^CONNECT (\S+) HTTP\/1\.[01]$/.exec(requestLine);
  if (m === null || lines.some((line) => !TOKEN.test(line.slice(0, Math.max(0, line.indexOf(':'))))))
    return null;
  return m[1] ?? null;
}

/**
 * Splits `host:port` / `[v6]:port` (CONNECT's target, a Host header): the host lower case without a
 * final dot (native/fast-http.c reads a Host's name as this does, or leaves it to JavaScript).
 */
export function splitHostPort(value: string, defaultPort: number): { host: string; port: number } | null {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d{1,5}))?$/.exec(value.trim());
  if (m === null) return null;
  const port = m[3] === undefined ? defaultPort : Number(m[3]);
  if (port < 1 || port > 65_535) return null;
  return { host: (m[1] ?? m[2] ?? '').toLowerCase().replace(/\.$/, ''), port };
}

/** The head sent to the destination: origin-form, hop-by-hop headers dropped, `Connection: close`. */
export function upstreamHead(head: RequestHead, path: string): Buffer {
  const lines = [`${head.method} ${path} HTTP/1.1`];
  for (let i = 0; i + 1 < head.rawHeaders.length; i += 2) {
    const key = head.rawHeaders[i] ?? '';
    if (!HOP_BY_HOP.has(key.toLowerCase())) lines.push(`${key}: ${head.rawHeaders[i + 1] ?? ''}`);
  }
  lines.push('Connection: close', '', '');
  return Buffer.from(lines.join('\r\n'), 'latin1');
}

/** Whether an answer's head ends its connection (`Connection: close`, or HTTP/1.0 without keep-alive). */
function answerCloses(head: string): boolean {
  const connection = /\r\nconnection:([^\r]*)/i.exec(head)?.[1]?.toLowerCase() ?? '';
  if (connection.split(',').some((t) => t.trim() === 'close')) return true;
  return head.startsWith('HTTP/1.0') && !connection.includes('keep-alive');
}

export interface FastRequest {
  readonly ctx: FlowContext;
  readonly client: Socket;
  /** Connecting or connected to `target`; nothing read from it yet. */
  readonly upstream: Socket;
  /** The head to send (empty: already sent to the destination). */
  readonly head: Buffer;
  readonly target: Destination & { readonly address: string; readonly port: number };
  readonly via: 'proxy' | 'transparent';
  readonly decision: Decision;
  /** The answer ended and the client may send another request: Node's HTTP server takes it. */
  readonly handBack: (client: Socket) => void;
}

/**
 * Sends the head and carries the answer back unparsed. The client is not read meanwhile: a next request
 * waits in its socket until the answer ends (the destination was told `Connection: close`), then goes to
 * Node's HTTP server, which decides it on its own.
 */
export function carryRequest(options: FastRequest): void {
  const { ctx, client, upstream, target, via, decision } = options;
  const started = Date.now();
  let answerHead = '';
  let headDone = false;
  let bytesDown = 0;
  let ended = false;
  client.allowHalfOpen = true; // a client that ends its input after the request still gets the answer
  const flow: Tracked = {
    dest: target,
    via,
    started,
    close: () => {
      upstream.destroy();
      client.destroy();
    },
  };
  ctx.open.add(flow);
  const finish = (): boolean => {
    if (ended) return false;
    ended = true;
    ctx.open.delete(flow);
    ctx.record(target, via, decision, { started, bytesUp: 0, bytesDown });
    return true;
  };
  upstream.on('data', (chunk: Buffer) => {
    if (headDone) bytesDown += chunk.length;
    else {
      answerHead += chunk.toString('latin1');
      const end = answerHead.indexOf('\r\n\r\n');
      if (end !== -1) {
        headDone = true;
        bytesDown = answerHead.length - end - 4;
        answerHead = answerHead.slice(0, end);
      }
    }
    if (!client.write(chunk)) upstream.pause();
  });
  const onDrain = (): void => void upstream.resume();
  client.on('drain', onDrain);
  upstream.once('end', () => {
    if (!finish()) return;
    upstream.destroy();
    if (client.destroyed) return;
    if (!headDone || answerCloses(answerHead) || client.readableEnded) client.end();
    else {
      client.off('close', onClientClose);
      client.off('drain', onDrain);
      options.handBack(client);
    }
  });
  upstream.on('error', (err) => {
    upstream.destroy();
    if (!finish()) return;
    if (client.bytesWritten > 0 || client.destroyed) {
      client.destroy();
      return;
    }
    const body = `AgentFense network policy point: ${target.name ?? target.address}:${target.port} failed: ${err.message}\n`;
    client.end(
      `HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
  const onClientClose = (): void => {
    upstream.destroy();
    finish();
  };
  client.once('close', onClientClose);
  if (options.head.length > 0) upstream.write(options.head); // empty: the C path sent it (fast-http.c)
  upstream.resume();
}
