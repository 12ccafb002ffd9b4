// A connection the namespace's NAT redirected to the policy point: the agent dialled an address itself
// (Node's fetch, a static binary, a raw connect()), so its destination is the address it dialled, and
// the name is the one its first bytes claim (TLS SNI, HTTP Host). A name must resolve to the dialled
// address, or the connection is refused (no SNI spoofing to an allowed name); without a name, the names
// the sandbox's DNS gave for that address and the address rules decide. Plain HTTP goes on to the HTTP
// handler, which decides each request.
import type { Socket } from 'node:net';
import type { FlowContext } from './context.js';
import type { Decision } from './decide.js';
import { SNIFF_LIMIT, sniff } from './sniff.js';
import type { Sniffed } from './sniff.js';
import { dial, tunnel } from './tunnel.js';

/** How long a client whose address alone is not allowed may take to send its first bytes. */
const FIRST_BYTES_MS = 10_000;

/** Reads until the first bytes say what they are (or the limit, the end, the deadline). */
export function readFirstBytes(
  client: Socket,
  timeoutMs: number,
): Promise<{ head: Buffer; sniffed: Sniffed | null }> {
  return new Promise((resolve) => {
    let head = Buffer.alloc(0);
    const done = (sniffed: Sniffed | null): void => {
      clearTimeout(timer);
      client.off('data', onData);
      client.off('end', onEnd);
      client.off('error', onEnd);
      client.pause();
      resolve({ head, sniffed });
    };
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const sniffed = sniff(head);
      if (sniffed.kind !== 'more') done(sniffed);
      else if (head.length >= SNIFF_LIMIT) done({ kind: 'other' });
    };
    const onEnd = (): void => done(null);
    const timer = setTimeout(() => done(null), timeoutMs);
    client.on('data', onData);
    client.once('end', onEnd);
    client.once('error', onEnd);
    client.resume();
  });
}

export interface TransparentHooks {
  /**
   * Plain HTTP: the HTTP handler takes the socket (the bytes read are put back first), and the
   * connection already dialled to the destination, if any, for the first request it allows there.
   */
  readonly http: (client: Socket, target: { address: string; port: number }, early?: Socket) => void;
  /**
   * An allowed TLS connection whose verified server name may carry a secret: returns true when it took
   * the connection (intercept.ts), false to tunnel it as any other.
   */
  readonly intercept?: (
    client: Socket,
    head: Buffer,
    target: { name: string; address: string; port: number },
    decision: Decision,
  ) => boolean;
  /**
   * An allowed TLS connection to a claimed name checked to be at the address dialled, tunnelled as it
   * is (not intercepted): the C accept path may start the next such one itself (fast-accept.ts).
   */
  readonly allowedTls?: (dest: { name: string; address: string; port: number }, decision: Decision) => void;
}

export async function handleTransparent(
  ctx: FlowContext,
  client: Socket,
  target: { address: string; port: number },
  hooks: TransparentHooks,
): Promise<void> {
  const { address, port } = target;
  // Half-close carries through a tunnel: the client's end of input must not end its output as well.
  client.allowHalfOpen = true;
  const byAddress = ctx.decideAddress(address, port);
  // A destination allowed by its address is dialled at once and its bytes flow to the client at once,
  // so a protocol where the server speaks first (SSH, SMTP) works; the client's bytes still wait until
  // their name (if any) is checked.
  let early: Socket | undefined;
  if (byAddress.decision.allowed) {
    early = dial(address, port);
    const upstream = early;
    const connected = await new Promise<boolean>((resolve) => {
      upstream.once('connect', () => resolve(true));
      upstream.once('error', () => resolve(false));
    });
    if (!connected) {
      client.destroy();
      const dest = byAddress.name === undefined ? { address, port } : { name: byAddress.name, address, port };
      ctx.record(dest, 'transparent', {
        ...byAddress.decision,
        reason: `${byAddress.decision.reason}; the destination did not accept the connection`,
      });
      return;
    }
    upstream.pipe(client);
  }
  const { head, sniffed } = await readFirstBytes(client, early === undefined ? FIRST_BYTES_MS : 2 ** 31 - 1);
  if (sniffed?.kind === 'http') {
    early?.unpipe(client);
    client.unshift(head);
    hooks.http(client, target, early);
    return;
  }
  const claimed = sniffed !== null && 'name' in sniffed ? sniffed.name : undefined;
  let decision: Decision = byAddress.decision;
  if (claimed !== undefined) {
    decision = ctx.policy.decide({ name: claimed, address, port });
    if (decision.allowed && !(await ctx.nameIsAt(claimed, address))) {
      decision = { allowed: false, reason: `${claimed} does not resolve to ${address}, the address dialled` };
    }
  } else if (sniffed === null && early === undefined) {
    decision = { ...decision, reason: `${decision.reason}; no name was sent` };
  }
  const name = claimed ?? byAddress.name;
  const dest = name === undefined ? { address, port } : { name, address, port };
  if (!decision.allowed) {
    early?.destroy();
    client.destroy();
    ctx.record(dest, 'transparent', decision);
    return;
  }
  // Only a name the ClientHello claimed and that resolves to the address dialled is ever intercepted.
  if (sniffed?.kind === 'tls' && claimed !== undefined && hooks.intercept !== undefined) {
    early?.unpipe(client);
    if (hooks.intercept(client, head, { name: claimed, address, port }, decision)) {
      early?.destroy();
      return;
    }
    early?.pipe(client);
  }
  if (sniffed?.kind === 'tls' && claimed !== undefined)
    hooks.allowedTls?.({ name: claimed, address, port }, decision);
  const upstream = early ?? dial(address, port);
  tunnel({
    ctx,
    client,
    upstream,
    dest,
    via: 'transparent',
    decision,
    head,
    downstreamPiped: early !== undefined,
  });
}
