// An allowed byte stream between the sandbox and its destination: piped both ways with back-pressure
// (a slow reader pauses the other side; nothing is buffered without bound), tracked while open, and
// audited with its byte counts when it ends.
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { FlowContext, Tracked } from './context.js';
import type { Decision, Destination } from './decide.js';

/** How long a dial of the destination may take. */
const CONNECT_TIMEOUT_MS = 15_000;

/** Dials the destination from the host's namespace; the returned socket is connecting. */
export function dial(address: string, port: number): Socket {
  const upstream = connect({ host: address, port, noDelay: true });
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
