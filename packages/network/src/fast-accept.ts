// The accept path in C (native/fast.c), on the relay's thread: it accepts the proxy port's connections
// itself and, for a redirected TLS connection whose name, address and port this process already
// decided allowed, dials and splices it without a turn of Node's event loop; everything else is handed
// here as an accepted socket with its bytes unread and takes the JavaScript path as before. Its table
// holds only what the JavaScript path decided (remember), for no longer than the name is known to be at
// the address, and is forgotten before a new policy or secret applies. The connection bound is counted
// on that thread for both paths. Node hears of each connection it carried (started, then its end) and
// keeps it in the same connection table and writes the same audit record as for its own.
// On by default; AGENTFENSE_NETWORK_DISABLE=fastAccept switches it off.
import { closeSync } from 'node:fs';
import { Socket } from 'node:net';
import type { FlowContext, Tracked } from './context.js';
import type { Decision } from './decide.js';
import type { FastEvent, NativeRelay } from './relay.js';

export const NETWORK_DISABLE_ENV = 'AGENTFENSE_NETWORK_DISABLE';
export const NETWORK_ENABLE_ENV = 'AGENTFENSE_NETWORK_ENABLE';
const SWITCHABLE = ['fastAccept'] as const;
export type NetworkFeature = (typeof SWITCHABLE)[number];
/**
 * Off unless AGENTFENSE_NETWORK_ENABLE names it. fastAccept is on: measured quiet, it brings transparent
 * HTTPS set-up within the +1 ms target (docs/decisions.md); AGENTFENSE_NETWORK_DISABLE=fastAccept
 * turns it off.
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
}

const keyOf = (name: string, address: string, port: number): string => `${name} ${address} ${port}`;

export class FastAccept {
  readonly #ctx: FlowContext;
  readonly #relay: NativeRelay;
  readonly #handlers: FastAcceptHandlers;
  /** The decision each table entry was remembered with: the audit record of a connection it started. */
  readonly #decisions = new Map<string, Decision>();
  #started = 0;

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

  /** Takes over a listening socket (the proxy port's). */
  listen(fd: number): void {
    this.#relay.listenFast(fd);
  }

  /**
   * The JavaScript path allowed TLS to `name` at `address`:`port`, the name checked to be at that
   * address: the next such connection may start in C, for as long as the resolver holds that.
   */
  remember(dest: { name: string; address: string; port: number }, decision: Decision): void {
    const ttl = Math.min(MAX_TTL_MS, this.#ctx.resolver.knownUntil(dest.name, dest.address) - Date.now());
    if (!decision.allowed || ttl <= 0) return;
    if (this.#decisions.size >= DECISIONS_LIMIT) this.#decisions.clear();
    this.#decisions.set(keyOf(dest.name, dest.address, dest.port), decision);
    this.#relay.rememberFast(dest.name, dest.address, dest.port, ttl);
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
    const { id, name, address, port, started } = event;
    const dest = { name, address, port };
    const ctx = this.#ctx;
    const now = ctx.policy.decide(dest);
    const decided = this.#decisions.get(keyOf(name, address, port)) ?? now;
    if (event.kind === 'failed') {
      ctx.record(dest, 'transparent', {
        ...decided,
        reason: `${decided.reason}; the destination did not accept the connection`,
      });
      return;
    }
    this.#started++;
    const entry = { destroy: (): void => relayed.close() };
    const flow: Tracked = { dest, via: 'transparent', started, close: () => relayed.close() };
    const relayed = this.#relay.track(id, (end) => {
      ctx.clients.leave(entry);
      ctx.open.delete(flow);
      ctx.record(dest, 'transparent', decided, { started, bytesUp: end.bytesUp, bytesDown: end.bytesDown });
    });
    ctx.clients.track(entry);
    ctx.open.add(flow);
    if (!now.allowed) {
      // A policy change came between its decision on the relay's thread and this report.
      ctx.open.delete(flow);
      relayed.close();
      ctx.record(dest, 'transparent', { ...now, reason: `closed by a policy change: ${now.reason}` });
    }
  }

  #handed(fd: number, over: boolean): void {
    let socket: Socket;
    try {
      socket = new Socket({
        fd,
        readable: true,
        writable: true,
        pauseOnCreate: true,
      } as ConstructorParameters<typeof Socket>[0]);
    } catch {
      closeSync(fd);
      if (!over) this.#relay.release();
      return;
    }
    socket.setNoDelay(true);
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
