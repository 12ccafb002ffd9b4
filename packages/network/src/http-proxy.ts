// Plain HTTP and the explicit proxy. Programs that honour the proxy variables (curl, pip, npm, git,
// Python, Go) send `CONNECT host:port` for HTTPS and absolute-form requests (`GET http://host/…`) for
// HTTP to 127.0.0.1:3128; plain HTTP the NAT redirected arrives here too, in origin-form with a Host.
// Every request is decided on its own (a keep-alive connection cannot carry a refused method after an
// allowed one), and a refused one gets a 403 whose body names the rule.
import { createServer, request as httpRequest } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { canonicalAddress } from './addresses.js';
import type { FlowContext, Tracked } from './context.js';
import type { Decision, Destination } from './decide.js';
import {
  HOP_BY_HOP,
  carryRequest,
  connectAuthority,
  parseSimpleRequest,
  readHead,
  splitHostPort,
  upstreamHead,
} from './http-fast.js';
import { readFirstBytes } from './transparent.js';
import type { TransparentHooks } from './transparent.js';
import { dial, tunnel } from './tunnel.js';

type Target = Destination & { readonly address: string; readonly port: number };

function dialable(t: Destination | undefined): t is Target {
  return t?.address !== undefined && t.port !== undefined;
}

export class HttpFlows {
  readonly server: Server;
  readonly #ctx: FlowContext;
  /** Sockets the NAT redirected: their destination address and port. */
  readonly #transparent = new WeakMap<Socket, { address: string; port: number }>();
  /**
   * A redirected socket's connection to its destination, dialled at accept because the address alone
   * was allowed: the first request decided allowed there is sent on it (no second dial). It carries
   * nothing before that decision, and is closed with its client.
   */
  readonly #early = new WeakMap<Socket, Socket>();

  readonly #intercept: TransparentHooks['intercept'];
  /** A CONNECT allowed and tunnelled (not intercepted) whose tunnel named its own name: C may take the next. */
  readonly #allowedConnect: TransparentHooks['allowedTls'];
  /** A GET or HEAD allowed whatever its method, explicit-proxy or redirected: C may send the next. */
  readonly #allowedHttp: { -readonly [via in 'proxy' | 'transparent']?: TransparentHooks['allowedTls'] };

  constructor(
    ctx: FlowContext,
    intercept?: TransparentHooks['intercept'],
    allowedConnect?: TransparentHooks['allowedTls'],
    allowedHttp: {
      proxy?: TransparentHooks['allowedTls'];
      transparent?: TransparentHooks['allowedTls'];
    } = {},
  ) {
    this.#ctx = ctx;
    this.#intercept = intercept;
    this.#allowedConnect = allowedConnect;
    this.#allowedHttp = allowedHttp;
    this.server = createServer({ requireHostHeader: false }, (req, res) => void this.#request(req, res));
    this.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      void this.#connect(req.url ?? '', socket as Socket, head);
    });
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      void this.#upgrade(req, socket as Socket, head);
    });
    this.server.on('clientError', (_err, socket) => socket.destroy());
  }

  /** An explicit proxy client (it dialled 127.0.0.1:3128 itself). */
  takeProxyClient(socket: Socket): void {
    void this.#first(socket);
  }

  /**
   * A CONNECT to `dest` the C path dialled and answered 200 (native/fast-connect.c), whose tunnel it
   * left to this flow: decided again by the rules now, then from the tunnel's first bytes as after this
   * flow's own 200.
   */
  resumeConnect(
    client: Socket,
    upstream: Socket,
    dest: { name: string; address: string; port: number },
  ): void {
    const decision = this.#decidedAgain(client, upstream, dest, 'proxy');
    if (decision === undefined) return;
    void this.#established(client, upstream, dest, decision, `${dest.name}:${dest.port}`);
  }

  /**
   * A request to `dest` whose head the C path sent (native/fast-http.c), explicit-proxy or redirected
   * (its Host's name at the address dialled): decided again now (refused in between: both closed), its
   * answer carried back, and the connection's later requests decided here as after its own first one.
   */
  resumeRequest(
    client: Socket,
    upstream: Socket,
    dest: { name: string; address: string; port: number; method: string },
    via: 'proxy' | 'transparent' = 'proxy',
  ): void {
    if (via === 'transparent') this.#transparent.set(client, { address: dest.address, port: dest.port });
    const decision = this.#decidedAgain(client, upstream, dest, via);
    if (decision === undefined) return;
    carryRequest({
      ctx: this.#ctx,
      client,
      upstream,
      head: Buffer.alloc(0),
      target: dest,
      via,
      decision,
      handBack: (socket) => this.#toServer(socket),
    });
  }

  /**
   * A connection the C path began, decided again now (a redirected one's name still known at the address
   * dialled): its decision, or undefined when refused in between (both closed; audited with the reason).
   */
  #decidedAgain(
    client: Socket,
    upstream: Socket,
    dest: Target,
    via: 'proxy' | 'transparent',
  ): Decision | undefined {
    client.on('error', () => client.destroy());
    const { name = '', address } = dest;
    const known = via === 'proxy' || this.#ctx.resolver.knownUntil(name, address) > Date.now();
    const spoofed = { allowed: false, reason: `${name} does not resolve to ${address}, the address dialled` };
    const decision = known ? this.#ctx.policy.decide(dest) : spoofed;
    if (decision.allowed) return decision;
    upstream.destroy();
    client.destroy();
    const reason = known ? `closed by a policy change: ${decision.reason}` : decision.reason;
    this.#ctx.record(dest, via, { ...decision, reason });
    return undefined;
  }

  /** A redirected plain-HTTP connection to `target`, with its destination already dialled or not. */
  takeTransparent(socket: Socket, target: { address: string; port: number }, early?: Socket): void {
    this.#transparent.set(socket, target);
    if (early !== undefined) {
      early.on('error', () => early.destroy());
      socket.once('close', () => early.destroy());
      this.#early.set(socket, early);
    }
    void this.#first(socket);
  }

  /**
   * A connection's first request: carried by http-fast.ts when it is a simple one and allowed;
   * otherwise (and for every later request) Node's HTTP server takes the connection, bytes and all.
   */
  async #first(socket: Socket): Promise<void> {
    const bytes = await readHead(socket);
    const authority = connectAuthority(bytes);
    if (authority !== null && !socket.destroyed) {
      void this.#connect(authority, socket, Buffer.alloc(0));
      return;
    }
    const head = parseSimpleRequest(bytes);
    if (head !== null && !socket.destroyed) {
      const { target, decision, path, hostNamed } = await this.#decideRequest(
        socket,
        head.method,
        head.url,
        head.host,
      );
      if (decision.allowed && dialable(target) && !socket.destroyed) {
        const via = this.#transparent.has(socket) ? 'transparent' : 'proxy';
        carryRequest({
          ctx: this.#ctx,
          client: socket,
          upstream: this.#takeEarly(socket, target) ?? dial(target.address, target.port),
          head: upstreamHead(head, path),
          target,
          via,
          decision,
          handBack: (client) => this.#toServer(client),
        });
        // A redirected request is remembered only when its own Host named the name (not the address's).
        if (via === 'proxy' || hostNamed === true) this.#rememberHttp(target, decision, via);
        return;
      }
    }
    // Ended before a whole head (what Node's server would answer 400), or gone: nothing to answer.
    if (socket.destroyed || socket.readableEnded) {
      socket.destroy();
      return;
    }
    if (bytes.length > 0) socket.unshift(bytes);
    this.#toServer(socket);
  }

  /**
   * A GET or HEAD to a name allowed (explicit-proxy, or redirected with it in its Host, checked to be at
   * the address dialled): C may send the next there itself, only while no rule has methods (its entry
   * is decided without one) and no secret is bound to the name; a name C reads the same (no final dot).
   */
  #rememberHttp(target: Target, decision: Decision, via: 'proxy' | 'transparent'): void {
    const { name, method } = target;
    const allowed = this.#allowedHttp[via];
    if (allowed === undefined || name === undefined || (method !== 'GET' && method !== 'HEAD')) return;
    if (this.#ctx.policy.hasMethodRules || this.#ctx.secrets?.bound(name) === true) return;
    if (!/^[a-z0-9._-]+$/.test(name) || name.endsWith('.')) return;
    allowed({ name, address: target.address, port: target.port }, decision);
  }

  #toServer(socket: Socket): void {
    this.server.emit('connection', socket);
    socket.resume();
  }

  /** The early connection of `client` if it goes to `target` and is still open; it is used once. */
  #takeEarly(client: Socket, target: Target): Socket | undefined {
    const early = this.#early.get(client);
    if (early === undefined) return undefined;
    this.#early.delete(client);
    const to = this.#transparent.get(client);
    if (!early.destroyed && to?.address === target.address && to.port === target.port) return early;
    early.destroy();
    return undefined;
  }

  /** Chooses the address of a named destination: the first one the policy allows. */
  async #resolveTarget(
    name: string,
    port: number,
    method?: string,
  ): Promise<{ target: Destination; decision: Decision }> {
    const withMethod = method === undefined ? {} : { method };
    if (isIP(name) !== 0) {
      const address = canonicalAddress(name);
      const known = this.#ctx.decideAddress(address, port);
      const decision =
        method === undefined ? known.decision : this.#ctx.policy.decide({ address, port, method });
      return { target: { address, port, ...withMethod }, decision };
    }
    const first = this.#ctx.policy.decide({ name, port, ...withMethod });
    if (!first.allowed && first.rule !== undefined)
      return { target: { name, port, ...withMethod }, decision: first };
    const addresses = await this.#ctx.resolver.resolve(name);
    let refused: { target: Destination; decision: Decision } = {
      target: { name, port, ...withMethod },
      decision: { allowed: false, reason: `${name} does not resolve` },
    };
    for (const address of addresses) {
      const dest = { name, address, port, ...withMethod };
      const decision = this.#ctx.policy.decide(dest);
      if (decision.allowed) return { target: dest, decision };
      refused = { target: dest, decision };
    }
    return refused;
  }

  /** The destination of a request: the redirected address with its Host, or the proxy request's URL. */
  #requestTarget(req: IncomingMessage): Promise<{ target?: Destination; decision: Decision; path: string }> {
    return this.#decideRequest(req.socket, req.method ?? 'GET', req.url ?? '', req.headers.host);
  }

  /** As #requestTarget; `hostNamed`: a redirected request's name is its Host's (checked to be there). */
  async #decideRequest(
    socket: Socket,
    method: string,
    requestUrl: string,
    hostValue: string | undefined,
  ): Promise<{ target?: Destination; decision: Decision; path: string; hostNamed?: boolean }> {
    const redirected = this.#transparent.get(socket);
    if (redirected !== undefined) {
      const hostHeader = splitHostPort(hostValue ?? '', redirected.port);
      const name = hostHeader === null || isIP(hostHeader.host) !== 0 ? undefined : hostHeader.host;
      let target: Target = { ...redirected, method, ...(name === undefined ? {} : { name }) };
      let decision = this.#ctx.policy.decide(target);
      if (name === undefined) {
        const known = this.#ctx.decideAddress(redirected.address, redirected.port);
        if (known.name !== undefined) {
          target = { ...target, name: known.name };
          decision = this.#ctx.policy.decide(target);
        }
      } else if (decision.allowed && !(await this.#ctx.nameIsAt(name, redirected.address))) {
        decision = {
          allowed: false,
          reason: `${name} does not resolve to ${redirected.address}, the address dialled`,
        };
      }
      return { target, decision, path: requestUrl || '/', hostNamed: name !== undefined };
    }
    let url: URL;
    try {
      url = new URL(requestUrl);
    } catch {
      return {
        decision: {
          allowed: false,
          reason: 'not a proxy request: send absolute URLs (http://host/…) through HTTP_PROXY',
        },
        path: '',
      };
    }
    if (url.protocol !== 'http:') {
      return {
        decision: { allowed: false, reason: `${url.protocol} through the proxy: use CONNECT for TLS` },
        path: '',
      };
    }
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    const resolved = await this.#resolveTarget(host, Number(url.port || 80), method);
    return { ...resolved, path: `${url.pathname}${url.search}` };
  }

  async #request(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const via = this.#transparent.has(req.socket) ? 'transparent' : 'proxy';
    const { target, decision, path } = await this.#requestTarget(req);
    const label = target ?? { port: 0, method: req.method ?? 'GET' };
    if (!decision.allowed || !dialable(target)) {
      this.#early.get(req.socket)?.destroy();
      this.#ctx.record(label, via, decision);
      res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
      res.end(
        `AgentFense network policy refused ${req.method ?? ''} ${target?.name ?? target?.address ?? req.url ?? ''}: ${decision.reason}\n`,
      );
      return;
    }
    const headers: string[] = [];
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
      const key = req.rawHeaders[i] ?? '';
      if (!HOP_BY_HOP.has(key.toLowerCase())) headers.push(key, req.rawHeaders[i + 1] ?? '');
    }
    headers.push('Connection', 'close');
    const started = Date.now();
    let bytesUp = 0;
    let bytesDown = 0;
    const early = this.#takeEarly(req.socket, target);
    const upstream = httpRequest({
      host: target.address,
      port: target.port,
      method: req.method,
      path,
      headers,
      setHost: false,
      // With an agent (even `agent: false`, a fresh one) Node dials itself and ignores
      // createConnection: the early connection must go without one, or the request dials twice.
      ...(early === undefined ? { agent: false } : { createConnection: () => early }),
    });
    // The early connection was paused when it stopped piping to the client; its reader is now the
    // request's parser (attached before 'socket' is emitted).
    if (early !== undefined) upstream.once('socket', (socket) => socket.resume());
    const flow: Tracked = {
      dest: target,
      via,
      started,
      close: () => {
        upstream.destroy();
        req.socket.destroy();
      },
    };
    this.#ctx.open.add(flow);
    const finish = (): void => {
      if (!this.#ctx.open.delete(flow)) return;
      this.#ctx.record(target, via, decision, { started, bytesUp, bytesDown });
    };
    req.on('data', (chunk: Buffer) => (bytesUp += chunk.length));
    upstream.on('response', (up) => {
      res.writeHead(up.statusCode ?? 502, up.rawHeaders);
      up.on('data', (chunk: Buffer) => (bytesDown += chunk.length));
      up.pipe(res);
      up.on('end', finish);
    });
    upstream.on('error', (err) => {
      finish();
      if (!res.headersSent) {
        res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
        res.end(
          `AgentFense network policy point: ${target.name ?? target.address}:${target.port} failed: ${err.message}\n`,
        );
      } else res.destroy();
    });
    res.on('close', finish);
    req.pipe(upstream);
  }

  async #connect(authority: string, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    socket.allowHalfOpen = true; // a tunnel's client may end its input and still read the answer
    const split = splitHostPort(authority, 443);
    const { target, decision } =
      split === null
        ? {
            target: undefined,
            decision: { allowed: false, reason: `CONNECT ${authority}: expected host:port` } as Decision,
          }
        : await this.#resolveTarget(split.host, split.port);
    if (!decision.allowed || !dialable(target)) {
      this.#ctx.record(target ?? { port: 0 }, 'proxy', decision);
      const body = `AgentFense network policy refused CONNECT ${authority}: ${decision.reason}\n`;
      socket.end(
        `HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
      return;
    }
    const upstream = dial(target.address, target.port);
    const connected = await new Promise<boolean>((resolve) => {
      upstream.once('connect', () => resolve(true));
      upstream.once('error', () => resolve(false));
    });
    if (!connected) {
      socket.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
      this.#ctx.record(target, 'proxy', {
        ...decision,
        reason: `${decision.reason}; the destination did not accept the connection`,
      });
      return;
    }
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) socket.unshift(head);
    await this.#established(socket, upstream, target, decision, authority);
  }

  /** After a CONNECT's 200: the tunnel's first bytes decide whether and how it is carried. */
  async #established(
    socket: Socket,
    upstream: Socket,
    target: Target,
    decision: Decision,
    authority: string,
  ): Promise<void> {
    // The tunnel's own first bytes may name another server (TLS SNI): that name is decided too.
    const first = await readFirstBytes(socket, 2 ** 31 - 1);
    const claimed = first.sniffed !== null && 'name' in first.sniffed ? first.sniffed.name : undefined;
    let final = decision;
    if (claimed !== undefined && claimed !== target.name) {
      final = this.#ctx.policy.decide({ name: claimed, address: target.address, port: target.port });
      if (final.allowed && !(await this.#ctx.nameIsAt(claimed, target.address))) {
        final = {
          allowed: false,
          reason: `${claimed} does not resolve to ${target.address}, the address of ${authority}`,
        };
      }
    }
    if (!final.allowed) {
      upstream.destroy();
      socket.destroy();
      this.#ctx.record({ ...target, name: claimed ?? target.name ?? '' }, 'proxy', final);
      return;
    }
    const name = claimed ?? target.name;
    if (first.sniffed?.kind === 'tls' && name !== undefined && this.#intercept !== undefined) {
      if (this.#intercept(socket, first.head, { ...target, name }, final)) {
        upstream.destroy();
        return;
      }
    }
    if (first.sniffed?.kind === 'tls' && target.name !== undefined && claimed === target.name)
      this.#allowedConnect?.({ name: target.name, address: target.address, port: target.port }, final);
    tunnel({
      ctx: this.#ctx,
      client: socket,
      upstream,
      dest: target,
      via: 'proxy',
      decision: final,
      head: first.head,
    });
  }

  /** A WebSocket (or other Upgrade) request: decided like a request, then a raw tunnel. */
  async #upgrade(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    this.#early.get(socket)?.destroy();
    const via = this.#transparent.has(socket) ? 'transparent' : 'proxy';
    const { target, decision, path } = await this.#requestTarget(req);
    if (!decision.allowed || !dialable(target)) {
      this.#ctx.record(target ?? { port: 0 }, via, decision);
      const body = `AgentFense network policy refused ${req.method ?? ''} ${req.url ?? ''}: ${decision.reason}\n`;
      socket.end(
        `HTTP/1.1 403 Forbidden\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
      return;
    }
    const lines = [`${req.method ?? 'GET'} ${path} HTTP/1.1`];
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
      const key = req.rawHeaders[i] ?? '';
      if (!key.toLowerCase().startsWith('proxy-')) lines.push(`${key}: ${req.rawHeaders[i + 1] ?? ''}`);
    }
    const request = Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), head]);
    tunnel({
      ctx: this.#ctx,
      client: socket,
      upstream: dial(target.address, target.port),
      dest: target,
      via,
      decision,
      head: request,
    });
  }
}
