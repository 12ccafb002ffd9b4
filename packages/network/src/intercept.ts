// An allowed TLS connection to a host a secret is bound to: the policy point terminates it with a
// certificate of the sandbox's CA (offering only HTTP/1.1), reads each request, puts the real values in
// place of their placeholders (headers, URL, body) and adds the binding's header, then sends it to the
// real host over a TLS connection verified strictly against the system's CAs (and the operator's extra
// ones). Real values coming back are masked to their placeholders. An upgrade (WebSocket) is swapped the
// same way, then its two sockets are joined. Each use is audited, never a value.
import { Agent, request as httpsRequest } from 'node:https';
import { createServer } from 'node:http';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { TLSSocket, checkServerIdentity } from 'node:tls';
import type { Duplex, Readable, Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import type { FlowContext, Tracked } from './context.js';
import type { Decision, Destination } from './decide.js';
import type { SecretSet } from './secret-set.js';
import { SwapStream, swapBytes, swapText } from './swap.js';
import type { Swap } from './swap.js';

type Target = Destination & { readonly name: string; readonly address: string; readonly port: number };

/** Bodies up to this size are swapped whole, so their Content-Length stays exact; larger ones stream. */
const WHOLE_BODY_LIMIT = 1024 * 1024;
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
]);

interface Prepared {
  readonly method: string;
  readonly path: string;
  readonly headers: [string, string][];
  readonly swaps: Swap[];
  readonly masks: Swap[];
  readonly used: Set<string>;
}

interface Conn {
  readonly target: Target;
  readonly agent: Agent;
  readonly set: SecretSet;
  readonly via: 'proxy' | 'transparent';
}

/** Reads a body whole (it is at most WHOLE_BODY_LIMIT). */
async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(chunk as Buffer);
  return Buffer.concat(parts);
}

function contentLength(headers: IncomingMessage['headers']): number | undefined {
  const value = headers['content-length'];
  return value === undefined ? undefined : Number(value);
}

/** A decoder for a response's Content-Encoding (one coding of gzip, deflate or br); none for identity. */
function decoderFor(encoding: string | undefined): Transform | undefined {
  const coding = (encoding ?? '').trim().toLowerCase();
  if (coding === 'gzip' || coding === 'x-gzip') return createGunzip();
  if (coding === 'deflate') return createInflate();
  if (coding === 'br') return createBrotliDecompress();
  return undefined;
}

export class Interceptor {
  readonly #ctx: FlowContext;
  readonly #conns = new WeakMap<object, Conn>();
  readonly #server = createServer({ requireHostHeader: false }, (req, res) => void this.#request(req, res));

  constructor(ctx: FlowContext) {
    this.#ctx = ctx;
    this.#server.on('clientError', (_err, socket) => socket.destroy());
    // Without this, Node answers an upgrade by closing the connection: no 101 ever came back.
    this.#server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      this.#upgrade(req, socket, head),
    );
  }

  /**
   * Takes an allowed connection whose first bytes (`head`, a ClientHello) were read: answers its TLS
   * itself and serves its requests. `early`, an upstream dialled before the name was known, is closed.
   */
  take(options: {
    set: SecretSet;
    client: Socket;
    head: Buffer;
    target: Target;
    via: 'proxy' | 'transparent';
    decision: Decision;
  }): void {
    const { set, client, target, via, decision } = options;
    const leaf = set.leaves.for(target.name);
    // The bytes read while deciding go back first: TLSSocket feeds what the socket holds to its parser.
    if (options.head.length > 0) client.unshift(options.head);
    const tls = new TLSSocket(client, {
      isServer: true,
      key: leaf.key,
      cert: leaf.cert,
      ALPNProtocols: ['http/1.1'],
    });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const started = Date.now();
    const flow: Tracked = { dest: target, via, started, close: () => tls.destroy() };
    this.#ctx.open.add(flow);
    tls.on('error', () => tls.destroy());
    tls.once('close', () => {
      agent.destroy();
      client.destroy();
      if (!this.#ctx.open.delete(flow)) return;
      this.#ctx.record(
        target,
        via,
        { ...decision, reason: `${decision.reason}; intercepted (a secret is bound to ${target.name})` },
        {
          started,
          bytesUp: client.bytesRead,
          bytesDown: client.bytesWritten,
        },
      );
    });
    this.#conns.set(tls, { target, agent, set, via });
    // Not client.resume(): the TLS layer reads the socket's handle itself; a JS reader would steal bytes.
    this.#server.emit('connection', tls);
  }

  /**
   * What goes to the real host for one request: its method, path and headers with the placeholders
   * swapped and the binding's header added, the masks for the way back and the secrets it used; or
   * the status and text of a refusal.
   */
  #prepare(conn: Conn, req: IncomingMessage): Prepared | { refuse: number; text: string } {
    const { target, set } = conn;
    const method = req.method ?? 'GET';
    const rawPath = req.url ?? '/';
    const host = (req.headers.host ?? target.name).toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
    // The TLS name was checked against the address dialled; a Host naming another server is refused, so
    // the name a secret is bound to is the one the request really goes to.
    if (host !== target.name) {
      return {
        refuse: 421,
        text: `AgentFense: Host ${host} is not ${target.name}, the server this connection was opened to\n`,
      };
    }
    let pathOnly: string;
    try {
      // Dot segments resolved (`/v1/../admin` is /admin): a path binding is checked on the real path.
      pathOnly = new URL(rawPath, 'https://x').pathname;
    } catch {
      return { refuse: 400, text: 'AgentFense: the request target is not a path\n' };
    }
    const used = new Set<string>();
    const secrets = set.forRequest(target.name, method, pathOnly);
    const swaps: Swap[] = secrets.map((s) => ({
      from: Buffer.from(s.placeholder),
      to: Buffer.from(s.value),
      onUse: () => used.add(s.name),
    }));
    // Coming back, every real value of the sandbox is masked, whichever request carried it.
    const masks: Swap[] = set.secrets.map((s) => ({
      from: Buffer.from(s.value),
      to: Buffer.from(s.placeholder),
    }));
    const headers: [string, string][] = [];
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
      const key = req.rawHeaders[i] ?? '';
      const lower = key.toLowerCase();
      if (!HOP_BY_HOP.has(lower) && lower !== 'accept-encoding')
        headers.push([key, swapText(req.rawHeaders[i + 1] ?? '', swaps)]);
    }
    // Answers asked uncompressed, so a value the host echoes back is seen (and masked) in them.
    headers.push(['Accept-Encoding', 'identity']);
    for (const s of secrets) {
      if (s.header === undefined) continue;
      const name = s.header.name.toLowerCase();
      const at = headers.findIndex(([k]) => k.toLowerCase() === name);
      const value: [string, string] = [s.header.name, s.header.value.split('{value}').join(s.value)];
      if (at === -1) headers.push(value);
      else headers[at] = value;
      used.add(s.name);
    }
    return { method, path: swapText(rawPath, swaps), headers, swaps, masks, used };
  }

  async #request(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const conn = this.#conns.get(req.socket);
    if (conn === undefined) {
      res.destroy();
      return;
    }
    const prepared = this.#prepare(conn, req);
    if ('refuse' in prepared) {
      res.writeHead(prepared.refuse, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
      res.end(prepared.text);
      return;
    }
    const { method, path, headers, swaps, masks, used } = prepared;
    const length = contentLength(req.headers);
    let body: Buffer | Readable | undefined;
    if (length !== undefined && length <= WHOLE_BODY_LIMIT) {
      body = swapBytes(await readAll(req), swaps, true).out;
      headers.push(['Content-Length', String(body.length)]);
    } else if (length !== undefined || req.headers['transfer-encoding'] !== undefined) {
      body = req.pipe(new SwapStream(swaps));
      headers.push(['Transfer-Encoding', 'chunked']);
    } else req.resume();
    this.#forward({ conn, req, res, method, path, headers, body, masks, used });
  }

  #forward(o: {
    conn: Conn;
    req: IncomingMessage;
    res: ServerResponse;
    method: string;
    path: string;
    headers: [string, string][];
    body: Buffer | Readable | undefined;
    masks: Swap[];
    used: Set<string>;
  }): void {
    const { conn, res, masks } = o;
    const { target, set } = conn;
    const upstream = httpsRequest({
      host: target.address,
      port: target.port,
      servername: target.name,
      method: o.method,
      path: o.path,
      headers: o.headers.flat() as unknown as OutgoingHttpHeaders,
      setHost: false,
      agent: conn.agent,
      ca: [...set.upstreamCa],
      rejectUnauthorized: true,
      // The certificate must be for the name the sandbox asked for, not merely for the address dialled.
      checkServerIdentity: (_host, cert) => checkServerIdentity(target.name, cert),
    });
    let audited = false;
    const auditUses = (): void => {
      if (audited) return;
      audited = true;
      for (const name of o.used) this.#ctx.recordSecret(name, target, o.method, conn.via);
    };
    upstream.on('error', (err) => {
      const reason = `the upstream ${target.name} (${target.address}) failed: ${err.message}`;
      this.#ctx.record(target, conn.via, { allowed: false, reason });
      if (!res.headersSent) {
        res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
        res.end(`AgentFense network policy point: ${reason}\n`);
      } else res.destroy();
    });
    upstream.on('response', (up) => {
      // Audited once the real host answered: a refused certificate never got the value.
      auditUses();
      void this.#respond(up, res, masks, o.method);
    });
    if (o.body === undefined) upstream.end();
    else if (Buffer.isBuffer(o.body)) upstream.end(o.body);
    else o.body.pipe(upstream);
  }

  /**
   * A WebSocket (or other) upgrade: the upgrade request is swapped like any request (headers, URL) and
   * sent to the verified real host; its 101 comes back with the values masked in its headers, then the
   * two sockets are joined. Frames after the upgrade are not searched: a value is swapped only in the
   * upgrade request. An answer other than 101 is relayed and the connection closed.
   */
  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const conn = this.#conns.get(req.socket);
    socket.on('error', () => socket.destroy());
    if (conn === undefined) {
      socket.destroy();
      return;
    }
    const rawHead = (status: number, message: string, headers: [string, string][]): string =>
      `HTTP/1.1 ${status} ${message}\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
    const prepared = this.#prepare(conn, req);
    if ('refuse' in prepared) {
      socket.end(
        rawHead(prepared.refuse, 'Refused', [
          ['Content-Type', 'text/plain; charset=utf-8'],
          ['Content-Length', String(Buffer.byteLength(prepared.text))],
          ['Connection', 'close'],
        ]) + prepared.text,
      );
      return;
    }
    const { method, path, headers, masks, used } = prepared;
    const { target, set } = conn;
    headers.push(['Connection', 'Upgrade'], ['Upgrade', swapText(req.headers.upgrade ?? '', prepared.swaps)]);
    const upstream = httpsRequest({
      host: target.address,
      port: target.port,
      servername: target.name,
      method,
      path,
      headers: headers.flat() as unknown as OutgoingHttpHeaders,
      setHost: false,
      agent: false,
      ca: [...set.upstreamCa],
      rejectUnauthorized: true,
      checkServerIdentity: (_host, cert) => checkServerIdentity(target.name, cert),
    });
    const masked = (up: IncomingMessage, drop: Set<string>): [string, string][] => {
      const out: [string, string][] = [];
      for (let i = 0; i + 1 < up.rawHeaders.length; i += 2) {
        const key = up.rawHeaders[i] ?? '';
        if (!drop.has(key.toLowerCase())) out.push([key, swapText(up.rawHeaders[i + 1] ?? '', masks)]);
      }
      return out;
    };
    const audit = (): void => {
      for (const name of used) this.#ctx.recordSecret(name, target, method, conn.via);
    };
    upstream.on('upgrade', (up: IncomingMessage, upSocket: Duplex, upHead: Buffer) => {
      audit();
      socket.write(
        rawHead(up.statusCode ?? 101, up.statusMessage ?? 'Switching Protocols', masked(up, new Set())),
      );
      if (upHead.length > 0) socket.write(upHead);
      if (head.length > 0) upSocket.write(head);
      upSocket.on('error', () => upSocket.destroy());
      upSocket.once('close', () => socket.destroy());
      socket.once('close', () => upSocket.destroy());
      upSocket.pipe(socket);
      socket.pipe(upSocket);
    });
    upstream.on('response', (up) => {
      // Refused the upgrade: its answer is relayed (masked), then the connection ends.
      audit();
      const kept = masked(up, HOP_BY_HOP);
      socket.write(rawHead(up.statusCode ?? 502, up.statusMessage ?? '', [...kept, ['Connection', 'close']]));
      up.pipe(new SwapStream(masks)).pipe(socket);
    });
    upstream.on('error', (err) => {
      const reason = `the upstream ${target.name} (${target.address}) failed: ${err.message}`;
      this.#ctx.record(target, conn.via, { allowed: false, reason });
      const text = `AgentFense network policy point: ${reason}\n`;
      socket.end(
        rawHead(502, 'Bad Gateway', [
          ['Content-Type', 'text/plain; charset=utf-8'],
          ['Content-Length', String(Buffer.byteLength(text))],
          ['Connection', 'close'],
        ]) + text,
      );
    });
    upstream.end();
  }

  async #respond(up: IncomingMessage, res: ServerResponse, masks: Swap[], method: string): Promise<void> {
    const headers: [string, string][] = [];
    for (let i = 0; i + 1 < up.rawHeaders.length; i += 2) {
      const key = up.rawHeaders[i] ?? '';
      if (!HOP_BY_HOP.has(key.toLowerCase()))
        headers.push([key, swapText(up.rawHeaders[i + 1] ?? '', masks)]);
    }
    const status = up.statusCode ?? 502;
    const length = contentLength(up.headers);
    const bodiless = method === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200);
    if (bodiless) {
      if (length !== undefined) headers.push(['Content-Length', String(length)]);
      res.writeHead(status, headers.flat());
      res.end();
      up.resume();
      return;
    }
    const decoder = decoderFor(up.headers['content-encoding']);
    if (decoder !== undefined) {
      // A host that compressed anyway: decoded here so the mask sees the body, and sent on uncompressed.
      const plain = headers.filter(([k]) => k.toLowerCase() !== 'content-encoding');
      res.writeHead(status, plain.flat());
      decoder.on('error', () => res.destroy());
      up.pipe(decoder).pipe(new SwapStream(masks)).pipe(res);
      return;
    }
    if (length !== undefined && length <= WHOLE_BODY_LIMIT) {
      const body = swapBytes(await readAll(up), masks, true).out;
      headers.push(['Content-Length', String(body.length)]);
      res.writeHead(status, headers.flat());
      res.end(body);
      return;
    }
    res.writeHead(status, headers.flat());
    up.pipe(new SwapStream(masks)).pipe(res);
  }
}
