// The accept path in C (native/fast.c), on the relay's thread: it accepts the proxy port's connections
// itself and, for a redirected TLS connection whose name, address and port this process already
// decided allowed, dials and splices it without a turn of Node's event loop; everything else is handed
// here as an accepted socket with its bytes unread and takes the JavaScript path as before. Its table
// holds only what the JavaScript path decided (remember), for no longer than the name is known to be at
// the address, and is forgotten before a new policy or secret applies. The connection bound is counted
// on that thread for both paths. Node hears of each connection it carried (started, then its end) and
// keeps it in the same connection table and writes the same audit record as for its own.
// On by default; AGENTFENSE_NETWORK_DISABLE=fastAccept switches it off. fastConnect (with it, on by
// default too) does the same for the explicit proxy's CONNECT to a name:port decided allowed
// (native/fast-connect.c): the tunnel is spliced once its ClientHello names that name, and handed back
// to Node otherwise. fastHttp (with them, on by default) sends the explicit proxy's first plain-HTTP GET
// or HEAD to a name:port decided allowed from that thread (native/fast-http.c); Node then carries the
// answer and decides every later request of the connection. fastTransparentHttp (with them, on by
// default) does the same for a redirected connection's first GET or HEAD whose Host was decided allowed
// at the address and port it dialled.
import { closeSync } from 'node:fs';
import { Socket } from 'node:net';
import type { FlowContext, Tracked } from './context.js';
import type { Decision } from './decide.js';
import type { FastEntryKind, FastEvent, NativeRelay } from './relay.js';

export const NETWORK_DISABLE_ENV = 'AGENTFENSE_NETWORK_DISABLE';
export const NETWORK_ENABLE_ENV = 'AGENTFENSE_NETWORK_ENABLE';
const SWITCHABLE = ['fastAccept', 'fastConnect', 'fastHttp', 'fastTransparentHttp'] as const;
export type NetworkFeature = (typeof SWITCHABLE)[number];
/**
 * Off unless AGENTFENSE_NETWORK_ENABLE names it. fastAccept is on: measured quiet, it brings transparent
 * HTTPS set-up within the +1 ms target (docs/decisions.md); AGENTFENSE_NETWORK_DISABLE=fastAccept
 * turns it off. fastConnect (which needs fastAccept's listener) is on: it took CONNECT's set-up from
 * +3.1-4.8 ms to +0.2-1.9 ms (docs/decisions.md); AGENTFENSE_NETWORK_DISABLE=fastConnect turns it off.
 * fastHttp (which needs it too) is on: it took the explicit proxy's plain HTTP from +2.7-4.5 ms to
 * +0.1-1.6 ms at load 8-11 (docs/decisions.md); AGENTFENSE_NETWORK_DISABLE=fastHttp turns it off.
 * fastTransparentHttp (which needs fastAccept) is on: it took the policy point's CPU for a redirected
 * plain-HTTP connection from 4.0-4.3 ms to 2.4-2.7 ms at load 9-11, and its set-up from +2.08 to
 * +1.11 ms in a quieter pair (docs/decisions.md);
 * AGENTFENSE_NETWORK_DISABLE=fastTransparentHttp turns it off.
 */
const OFF_BY_DEFAULT: readonly NetworkFeature[] = [];

/** Whether a feature is on: the default, AGENTFENSE_NETWORK_ENABLE, then AGENTFENSE_NETWORK_DISABLE. */
export function networkFeatureOn(feature: NetworkFeature, env: NodeJS.ProcessEnv): boolean {
  const named = (variable: string): string[] => {
    const names = (env[variable] ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    for (const name of names) {
      if (!(SWITCHABLE as readonly string[]).includes(name)) {
        throw new Error(
          `${variable}: unknown network feature ${JSON.stringify(name)}; known: ${SWITCHABLE.join(', ')}`,
        );
      }
    }
    return names;
  };
  const enabled = named(NETWORK_ENABLE_ENV).includes(feature);
  const disabled = named(NETWORK_DISABLE_ENV).includes(feature);
  return !disabled && (enabled || !OFF_BY_DEFAULT.includes(feature));
}

/** A decision's age limit: never past the resolver's own, and at most this. */
const MAX_TTL_MS = 30_000;
const DECISIONS_LIMIT = 4_096;

export interface FastAcceptHandlers {
  /** An accepted connection for the JavaScript path (its slot held). */
  readonly connection: (socket: Socket) => void;
  /** An accepted connection past the bound (no slot): refused and audited. */
  readonly overBound: (socket: Socket) => void;
  /**
   * A CONNECT to `dest` answered 200 by C whose tunnel Node decides (another or no server name inside
   * it, a rule change): the client (its slot held) and the connected upstream, nothing read of either.
   */
  readonly tunnel: (
    client: Socket,
    upstream: Socket,
    dest: { name: string; address: string; port: number },
    started: number,
  ) => void;
  /**
   * A plain-HTTP request to `dest` whose head C sent (native/fast-http.c), of the explicit proxy or of
   * a redirected connection (`via`): the client (its slot held, nothing after the head read) and the
   * upstream, nothing of the answer read.
   */
  readonly http: (
    client: Socket,
    upstream: Socket,
    dest: { name: string; address: string; port: number; method: string },
    via: 'proxy' | 'transparent',
  ) => void;
}

/**
 * What a remembered decision is for: transparent TLS, an explicit-proxy CONNECT or plain-HTTP request,
 * a redirected plain-HTTP request.
 */
type Via = 'proxy' | 'transparent' | 'http' | 'transparentHttp';
const ENTRY: Readonly<Record<Via, FastEntryKind>> = {
  transparent: 'transparent',
  proxy: 'connect',
  http: 'http',
  transparentHttp: 'transparentHttp',
};

const keyOf = (via: Via, name: string, address: string, port: number): string =>
  `${via} ${name} ${address} ${port}`;

/** A descriptor from the relay's thread as a paused socket (null: it could not be; it is closed). */
function adoptFd(fd: number, allowHalfOpen = false): Socket | null {
  try {
    const socket = new Socket({
      fd,
      readable: true,
      writable: true,
      allowHalfOpen,
      pauseOnCreate: true,
    } as ConstructorParameters<typeof Socket>[0]);
    socket.setNoDelay(true);
    return socket;
  } catch {
    closeSync(fd);
    return null;
  }
}

export class FastAccept {
  readonly #ctx: FlowContext;
  readonly #relay: NativeRelay;
  readonly #handlers: FastAcceptHandlers;
  /** The decision each table entry was remembered with: the audit record of a connection it started. */
  readonly #decisions = new Map<string, Decision>();
  #started = 0;
  #requests = 0;
  #transparentRequests = 0;

  private constructor(ctx: FlowContext, relay: NativeRelay, handlers: FastAcceptHandlers) {
    this.#ctx = ctx;
    this.#relay = relay;
    this.#handlers = handlers;
  }

  /** Starts it on the context's relay; undefined where the relay addon does not load. */
  static start(ctx: FlowContext, handlers: FastAcceptHandlers): FastAccept | undefined {
    const relay = ctx.relay;
    if (relay === undefined) return undefined;
    const fast = new FastAccept(ctx, relay, handlers);
    relay.startFast(ctx.maxConnections, (event) => fast.#onEvent(event));
    ctx.clients.countWith({ acquire: () => relay.acquire(), release: () => relay.release() });
    ctx.fast = fast;
    return fast;
  }

  /** Connections this path dialled and relayed itself so far. */
  get started(): number {
    return this.#started;
  }

  /** Explicit-proxy plain-HTTP requests this path sent itself so far (fast-http.c). */
  get requests(): number {
    return this.#requests;
  }

  /** Redirected plain-HTTP requests this path sent itself so far (fast-http.c, via fast.c's peek). */
  get transparentRequests(): number {
    return this.#transparentRequests;
  }

  /** Takes over a listening socket (the proxy port's). */
  listen(fd: number): void {
    this.#relay.listenFast(fd);
  }

  /**
   * The JavaScript path allowed TLS to `name` at `address`:`port`, the name checked to be at that
   * address: the next such connection may start in C, for as long as the resolver holds that. Via
   * 'proxy': a CONNECT to `name`:`port` it dialled at `address`, whose tunnel named `name` (the next
   * CONNECT to `name`:`port` is dialled at `address` by C, and spliced if its tunnel names `name`).
   * Via 'http': an explicit-proxy plain-HTTP request to `name`:`port` it sent to `address`, decided
   * without regard to its method (the next GET or HEAD there is sent by C). Via 'transparentHttp': a
   * redirected plain-HTTP request whose Host named `name`, dialled at `address`:`port`, the name checked
   * to be at that address, decided without regard to its method (the next GET or HEAD with that Host
   * dialled there is sent by C).
   */
  remember(
    dest: { name: string; address: string; port: number },
    decision: Decision,
    via: Via = 'transparent',
  ): void {
    const ttl = Math.min(MAX_TTL_MS, this.#ctx.resolver.knownUntil(dest.name, dest.address) - Date.now());
    if (!decision.allowed || ttl <= 0) return;
    if (this.#decisions.size >= DECISIONS_LIMIT) this.#decisions.clear();
    this.#decisions.set(keyOf(via, dest.name, dest.address, dest.port), decision);
    this.#relay.rememberFast(dest.name, dest.address, dest.port, ttl, ENTRY[via]);
  }

  /** Every decision forgotten (a policy or secret change): the JavaScript path decides again. */
  forget(): void {
    this.#relay.clearFast();
  }

  /** No more accepts (the policy point closes). */
  stop(): void {
    this.#relay.stopFast();
  }

  #onEvent(event: FastEvent): void {
    if (event.kind === 'handed') {
      this.#handed(event.fd, event.over);
      return;
    }
    if (event.kind === 'tunnel' || event.kind === 'http') {
      this.#tunnel(event);
      return;
    }
    const { id, name, address, port, started, via } = event;
    const dest = { name, address, port };
    const ctx = this.#ctx;
    const now = ctx.policy.decide(dest);
    const decided = this.#decisions.get(keyOf(via, name, address, port)) ?? now;
    if (event.kind === 'failed') {
      ctx.record(dest, via, {
        ...decided,
        reason: `${decided.reason}; the destination did not accept the connection`,
      });
      return;
    }
    this.#started++;
    const entry = { destroy: (): void => relayed.close() };
    const flow: Tracked = { dest, via, started, close: () => relayed.close() };
    const relayed = this.#relay.track(id, (end) => {
      ctx.clients.leave(entry);
      ctx.open.delete(flow);
      ctx.record(dest, via, decided, { started, bytesUp: end.bytesUp, bytesDown: end.bytesDown });
    });
    ctx.clients.track(entry);
    ctx.open.add(flow);
    if (!now.allowed) {
      // A policy change came between its decision on the relay's thread and this report.
      ctx.open.delete(flow);
      relayed.close();
      ctx.record(dest, via, { ...now, reason: `closed by a policy change: ${now.reason}` });
    }
  }

  #tunnel(event: Extract<FastEvent, { kind: 'tunnel' | 'http' }>): void {
    // Half-open both, as the JavaScript path's own tunnel sockets: a side's end ends the other's output.
    const client = adoptFd(event.fd, true);
    const upstream = adoptFd(event.upstreamFd, true);
    if (client === null || upstream === null) {
      client?.destroy();
      upstream?.destroy();
      this.#relay.release();
      return;
    }
    const { clients } = this.#ctx;
    clients.adopt(client);
    client.once('close', () => clients.leave(client));
    upstream.on('error', () => upstream.destroy());
    const { name, address, port, started } = event;
    if (event.kind === 'http') {
      if (event.via === 'transparent') this.#transparentRequests++;
      else this.#requests++;
      this.#handlers.http(client, upstream, { name, address, port, method: event.method }, event.via);
    } else this.#handlers.tunnel(client, upstream, { name, address, port }, started);
  }

  #handed(fd: number, over: boolean): void {
    const socket = adoptFd(fd);
    if (socket === null) {
      if (!over) this.#relay.release();
      return;
    }
    if (over) {
      this.#handlers.overBound(socket);
      return;
    }
    const { clients } = this.#ctx;
    clients.adopt(socket);
    socket.once('close', () => clients.leave(socket));
    socket.on('error', () => socket.destroy());
    this.#handlers.connection(socket);
  }
}
