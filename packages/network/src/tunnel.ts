// An allowed byte stream between the sandbox and its destination, tracked while open and audited with
// its byte counts when it ends. Node pipes it first, with back-pressure (a slow reader pauses the other
// side; nothing is buffered without bound): a short connection pays Node's small cost per connection
// and reaches its first byte without a hand-over. Once it has carried HANDOVER_BYTES either way, it is
// handed to the kernel relay (relay.ts: splice(2) on the policy point's epoll thread), whose throughput
// a long transfer needs; where the addon does not load, Node pipes it to the end. Either way half-close
// carries through: a side's end of input ends the other's output, and the answer still flows back.
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { FlowContext, Tracked } from './context.js';
import type { Decision, Destination } from './decide.js';
import { flushed } from './relay.js';
import type { Relayed } from './relay.js';

/** How long a dial of the destination may take. */
const CONNECT_TIMEOUT_MS = 15_000;

/** Dials the destination from the host's namespace; the returned socket is connecting. */
export function dial(address: string, port: number): Socket {
  const upstream = connect({ host: address, port, noDelay: true, allowHalfOpen: true });
  upstream.setTimeout(CONNECT_TIMEOUT_MS, () => upstream.destroy(new Error('connect timed out')));
  upstream.once('connect', () => upstream.setTimeout(0));
  return upstream;
}

export interface TunnelOptions {
  readonly ctx: FlowContext;
  readonly client: Socket;
  readonly upstream: Socket;
  readonly dest: Destination & { readonly address: string; readonly port: number };
  readonly via: 'proxy' | 'transparent';
  readonly decision: Decision;
  /** Bytes the client already sent (read while deciding), written to the upstream first. */
  readonly head?: Buffer;
  /** The upstream already pipes into the client (a server that speaks first). */
  readonly downstreamPiped?: boolean;
}

/**
 * Bytes carried one way after which a tunnel leaves Node for the kernel relay. Below it, Node's pipe
 * costs less CPU per connection than a hand-over (pipes, epoll registration, a wake of the relay's
 * thread); above it, a transfer is long enough that the kernel's throughput pays.
 * AGENTFENSE_NETWORK_HANDOVER_BYTES sets it (0: at once, as bench:network compares).
 */
export const HANDOVER_BYTES = handoverBytes(process.env.AGENTFENSE_NETWORK_HANDOVER_BYTES);

function handoverBytes(value: string | undefined): number {
  const bytes = Number(value);
  return value !== undefined && value !== '' && Number.isSafeInteger(bytes) && bytes >= 0
    ? bytes
    : 512 * 1024;
}

/** Resolves true once `socket` is connected, false if it fails first. */
function connected(socket: Socket): Promise<boolean> {
  if (socket.destroyed) return Promise.resolve(false);
  if (!socket.connecting) return Promise.resolve(true);
  return new Promise((resolve) => {
    socket.once('connect', () => resolve(true));
    socket.once('close', () => resolve(false));
    socket.once('error', () => resolve(false));
  });
}

export function tunnel(options: TunnelOptions): void {
  new Tunnel(options).start();
}

/** One tunnel: piped in Node, then (past HANDOVER_BYTES, where the relay loads) relayed by the kernel. */
class Tunnel {
  readonly #o: TunnelOptions;
  readonly #started = Date.now();
  readonly #flow: Tracked;
  #state: 'node' | 'handing' | 'relayed' | 'ended' = 'node';
  #handle: Relayed | undefined;
  #up = 0;
  #down = 0;
  /** Node carries it to its end (no relay here, or a side ended before the hand-over). */
  #kept = false;
  // Bound once per tunnel (listeners that can be removed at the hand-over).
  readonly #onUp = (chunk: Buffer): void => this.#carry(chunk, this.#o.client, this.#o.upstream, true);
  readonly #onDown = (chunk: Buffer): void => this.#carry(chunk, this.#o.upstream, this.#o.client, false);
  readonly #finish = (): void => this.#end();

  constructor(options: TunnelOptions) {
    this.#o = options;
    const { client, upstream, dest, via } = options;
    this.#flow = {
      dest,
      via,
      started: this.#started,
      close: () => {
        this.#handle?.close();
        client.destroy();
        upstream.destroy();
      },
    };
  }

  start(): void {
    const { ctx, client, upstream, head } = this.#o;
    ctx.open.add(this.#flow);
    client.allowHalfOpen = true;
    if (this.#o.downstreamPiped === true) upstream.unpipe(client);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      from.once('close', this.#finish);
      from.on('error', this.#finish);
      // Back-pressure: a side that cannot take more pauses the other until it drains.
      to.on('drain', () => {
        if (this.#state === 'node') from.resume();
      });
      // Half-close: a side's end of input ends the other's output (while Node carries it).
      from.once('end', () => {
        if (this.#state === 'node') to.end();
      });
    }
    client.on('data', this.#onUp);
    upstream.on('data', this.#onDown);
    if (head !== undefined && head.length > 0) upstream.write(head);
    // Either side may have ended while the decision was made: then the flow ends here.
    if (client.destroyed || upstream.destroyed) {
      this.#end();
      return;
    }
    client.resume();
    upstream.resume();
    if (HANDOVER_BYTES === 0) void this.#handOver();
  }

  #carry(chunk: Buffer, from: Socket, to: Socket, up: boolean): void {
    if (!to.write(chunk)) from.pause();
    if (up) this.#up += chunk.length;
    else this.#down += chunk.length;
    if (this.#state === 'node' && !this.#kept && Math.max(this.#up, this.#down) >= HANDOVER_BYTES)
      void this.#handOver();
  }

  /** Node's side of the end: both sockets closed, the audit record with the bytes each way. */
  #end(): void {
    if (this.#state === 'ended' || this.#state === 'relayed') return;
    this.#state = 'ended';
    const { ctx, client, upstream, dest, via, decision } = this.#o;
    ctx.open.delete(this.#flow);
    client.destroy();
    upstream.destroy();
    ctx.record(dest, via, decision, {
      started: this.#started,
      bytesUp: upstream.bytesWritten,
      bytesDown: client.bytesWritten,
    });
  }

  /**
   * Both sockets leave Node for the kernel relay, once what Node wrote has reached the kernel. Nothing
   * is carried by Node from here on: what it reads meanwhile stays in its buffers and goes over as the
   * relay's first bytes. A side that already ended (half-close) keeps the tunnel in Node to its end.
   */
  async #handOver(): Promise<void> {
    const { ctx, client, upstream, dest, via, decision } = this.#o;
    const relay = ctx.relay;
    const ended =
      client.readableEnded || upstream.readableEnded || client.writableEnded || upstream.writableEnded;
    if (relay === undefined || ended) {
      this.#kept = true;
      return;
    }
    this.#state = 'handing';
    client.pause();
    upstream.pause();
    const ready = await connected(upstream);
    await Promise.all([flushed(client), flushed(upstream)]);
    if (this.#state !== 'handing') return; // ended (closed, failed, refused by a rule change) meanwhile
    if (!ready || client.destroyed || upstream.destroyed) {
      this.#end();
      return;
    }
    // Read by nobody from here: relay() takes what Node buffered with read(), which emits 'data'.
    client.off('data', this.#onUp);
    upstream.off('data', this.#onDown);
    this.#state = 'relayed';
    const before = { up: upstream.bytesWritten, down: client.bytesWritten };
    const started = this.#started;
    const token = { destroy: (): void => this.#handle?.close() };
    try {
      this.#handle = relay.relay({
        client,
        upstream,
        onEnd: (end) => {
          ctx.clients.leave(token);
          ctx.open.delete(this.#flow);
          ctx.record(dest, via, decision, {
            started,
            bytesUp: before.up + end.bytesUp,
            bytesDown: before.down + end.bytesDown,
          });
        },
      });
    } catch {
      ctx.open.delete(this.#flow);
      ctx.record(dest, via, decision, { started, bytesUp: before.up, bytesDown: before.down });
      return;
    }
    // The relayed connection still counts against the sandbox's bound, in its client socket's slot.
    ctx.clients.replace(client, token);
  }
}
