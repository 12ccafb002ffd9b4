// An allowed byte stream between the sandbox and its destination, tracked while open and audited with
// its byte counts when it ends. Relayed by the kernel (relay.ts: splice(2) on the policy point's epoll
// thread) where the addon loads; otherwise piped in Node with back-pressure (a slow reader pauses the
// other side; nothing is buffered without bound). Either way half-close carries through: a side's end
// of input ends the other's output, and the answer still flows back.
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

export function tunnel(options: TunnelOptions): void {
  if (options.ctx.relay === undefined) piped(options);
  else void relayed(options);
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

/** The kernel relays it: both sockets leave Node once connected and flushed. */
async function relayed(options: TunnelOptions): Promise<void> {
  const { ctx, client, upstream, dest, via, decision } = options;
  const started = Date.now();
  const relay = ctx.relay;
  let handle: Relayed | undefined;
  // Tracked from the start, so a rule change during the hand-over closes it too.
  const flow: Tracked = {
    dest,
    via,
    started,
    close: () => {
      if (handle !== undefined) handle.close();
      client.destroy();
      upstream.destroy();
    },
  };
  ctx.open.add(flow);
  client.allowHalfOpen = true;
  client.on('error', () => client.destroy());
  upstream.on('error', () => upstream.destroy());
  if (options.downstreamPiped === true) upstream.unpipe(client);
  // Nothing may be read by Node from here on: what it already holds goes over as the relay's head.
  client.pause();
  upstream.pause();
  const ready = (await connected(upstream)) && !client.destroyed;
  await Promise.all([flushed(client), flushed(upstream)]);
  if (relay === undefined || !ready || client.destroyed || upstream.destroyed) {
    ctx.open.delete(flow);
    client.destroy();
    upstream.destroy();
    ctx.record(dest, via, decision, { started, bytesUp: 0, bytesDown: client.bytesWritten });
    return;
  }
  // Bytes Node wrote before the hand-over (a CONNECT's 200, a speaking server's greeting) count too.
  const before = { up: upstream.bytesWritten, down: client.bytesWritten };
  const token = { destroy: (): void => handle?.close() };
  try {
    handle = relay.relay({
      client,
      upstream,
      ...(options.head === undefined ? {} : { headUp: options.head }),
      onEnd: (end) => {
        ctx.clients.delete(token);
        ctx.open.delete(flow);
        ctx.record(dest, via, decision, {
          started,
          bytesUp: before.up + end.bytesUp,
          bytesDown: before.down + end.bytesDown,
        });
      },
    });
  } catch {
    ctx.open.delete(flow);
    ctx.record(dest, via, decision, { started, bytesUp: before.up, bytesDown: before.down });
    return;
  }
  // The relayed connection still counts against the sandbox's bound, as its client socket did.
  ctx.clients.add(token);
}

/** Node pipes it (the addon is not there). */
function piped(options: TunnelOptions): void {
  const { ctx, client, upstream, dest, via, decision } = options;
  const started = Date.now();
  let ended = false;
  const flow: Tracked = {
    dest,
    via,
    started,
    close: () => {
      client.destroy();
      upstream.destroy();
    },
  };
  ctx.open.add(flow);
  const finish = (): void => {
    if (ended) return;
    ended = true;
    ctx.open.delete(flow);
    client.destroy();
    upstream.destroy();
    ctx.record(dest, via, decision, {
      started,
      bytesUp: upstream.bytesWritten,
      bytesDown: client.bytesWritten,
    });
  };
  client.once('close', finish);
  upstream.once('close', finish);
  client.on('error', finish);
  upstream.on('error', finish);
  if (options.head !== undefined && options.head.length > 0) upstream.write(options.head);
  // Either side may have ended while the decision was made: then the flow ends here.
  if (client.destroyed || upstream.destroyed) {
    finish();
    return;
  }
  client.pipe(upstream);
  if (options.downstreamPiped !== true) upstream.pipe(client);
  client.resume();
}
