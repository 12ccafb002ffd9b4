// The native relay of allowed tunnels (native/relay.c, dist/relay.node): once a tunnel is decided, its
// two sockets leave Node and the kernel moves their bytes with splice(2) on one epoll thread per policy
// point. Where the addon cannot load (or AGENTFENSE_NETWORK_RELAY=node), tunnels stay piped in Node.
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';

interface RelayAddon {
  create(onEnd: (id: number, bytesUp: number, bytesDown: number, errno: number) => void): object;
  add(relay: object, clientFd: number, upstreamFd: number, headUp?: Buffer, headDown?: Buffer): number;
  close(relay: object, id: number): boolean;
  count(relay: object): number;
  // The accept path in C (native/fast.c, src/fast-accept.ts).
  fastStart(relay: object, onFast: (kind: string, ...args: unknown[]) => void, maxConnections: number): void;
  fastListen(relay: object, fd: number): void;
  fastRemember(relay: object, name: string, address: string, port: number, ttlMs: number, kind: number): void;
  fastClear(relay: object): void;
  fastAcquire(relay: object): boolean;
  fastRelease(relay: object): void;
  fastStop(relay: object): void;
}

/**
 * What the accept path reports (native/fast.c): a connection for Node, one it relays itself, or a
 * CONNECT it answered 200 whose tunnel Node decides from there (native/fast-connect.c).
 */
export type FastEvent =
  | { readonly kind: 'handed'; readonly fd: number; readonly over: boolean }
  | {
      readonly kind: 'started' | 'failed';
      readonly id: number;
      readonly name: string;
      readonly address: string;
      readonly port: number;
      readonly started: number;
      readonly errno: number;
      readonly via: 'proxy' | 'transparent';
    }
  | {
      readonly kind: 'tunnel';
      readonly fd: number;
      readonly upstreamFd: number;
      readonly name: string;
      readonly address: string;
      readonly port: number;
      readonly started: number;
    }
  | {
      /** A plain-HTTP request whose head C sent (native/fast-http.c): its answer is Node's. */
      readonly kind: 'http';
      readonly fd: number;
      readonly upstreamFd: number;
      readonly name: string;
      readonly address: string;
      readonly port: number;
      readonly started: number;
      readonly method: string;
      /** 'proxy': an explicit-proxy request; 'transparent': a redirected connection's, its Host's name. */
      readonly via: 'proxy' | 'transparent';
    };

/** What a table entry of the accept path is (native/fast-table.h ENTRY_*). */
export type FastEntryKind = 'transparent' | 'connect' | 'http' | 'transparentHttp';
const ENTRY_KINDS: Readonly<Record<FastEntryKind, number>> = {
  transparent: 0,
  connect: 1,
  http: 2,
  transparentHttp: 3,
};

/** What the relay reports when a connection ends: bytes delivered each way, and errno (0: clean end). */
export interface RelayEnd {
  readonly bytesUp: number;
  readonly bytesDown: number;
  readonly errno: number;
}

let addon: RelayAddon | null | undefined;

function loadAddon(): RelayAddon | null {
  if (addon !== undefined) return addon;
  if (process.env.AGENTFENSE_NETWORK_RELAY === 'node') return (addon = null);
  const url = new URL(
    import.meta.url.includes('/dist/') ? './relay.node' : '../dist/relay.node',
    import.meta.url,
  );
  try {
    addon = createRequire(import.meta.url)(url.pathname) as RelayAddon;
  } catch {
    addon = null; // not built here: tunnels are piped in Node
  }
  return addon;
}

/**
 * Takes a socket away from Node for good: reading stops, what Node had already read is returned, and
 * Node's descriptor is closed once the relay holds its own duplicate (closing one of two descriptors of
 * a socket sends nothing). Synchronous from readStop to destroy, so libuv reads nothing in between.
 * Its writes must have reached the kernel first (`flushed`).
 */
function detach(socket: Socket): { fd: number; buffered: Buffer | undefined } {
  const handle = (socket as unknown as { _handle?: { fd?: number; readStop?: () => number } })._handle;
  const fd = handle?.fd;
  if (handle === undefined || typeof fd !== 'number' || fd < 0) throw new Error('no descriptor');
  handle.readStop?.();
  (handle as { reading?: boolean }).reading = false;
  const buffered = socket.readableLength > 0 ? (socket.read() as Buffer | null) : null;
  return { fd, buffered: buffered ?? undefined };
}

/** Resolves once everything written to `socket` is in the kernel (or it closed). */
export function flushed(socket: Socket): Promise<void> {
  if (socket.writableLength === 0 || socket.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      socket.off('drain', done);
      socket.off('close', done);
      resolve();
    };
    socket.once('drain', done);
    socket.once('close', done);
  });
}

/** One relayed connection: close it (a live rule change); its end arrives through `onEnd`. */
export interface Relayed {
  close(): void;
}

/** One policy point's relay: one epoll thread, created at the first tunnel. */
export class NativeRelay {
  readonly #addon: RelayAddon;
  readonly #relay: object;
  readonly #ends = new Map<number, (end: RelayEnd) => void>();

  private constructor(loaded: RelayAddon) {
    this.#addon = loaded;
    this.#relay = loaded.create((id, bytesUp, bytesDown, errno) => {
      const onEnd = this.#ends.get(id);
      this.#ends.delete(id);
      onEnd?.({ bytesUp, bytesDown, errno });
    });
  }

  /** The relay, or undefined where the addon cannot load (tunnels are then piped in Node). */
  static create(): NativeRelay | undefined {
    const loaded = loadAddon();
    if (loaded === null) return undefined;
    try {
      return new NativeRelay(loaded);
    } catch {
      return undefined; // no epoll or thread to be had: tunnels are piped in Node
    }
  }

  /** Connections relayed now. */
  get size(): number {
    return this.#addon.count(this.#relay);
  }

  /**
   * Hands both connected sockets over; `headUp` goes to the upstream first (bytes read while deciding),
   * then what Node had buffered of each side. Node's sockets are destroyed (their 'close' follows);
   * `onEnd` is called once, when both directions ended or one side failed.
   */
  relay(options: {
    client: Socket;
    upstream: Socket;
    headUp?: Buffer;
    onEnd: (end: RelayEnd) => void;
  }): Relayed {
    const { client, upstream } = options;
    const up = detach(client);
    const down = detach(upstream);
    const headUp = Buffer.concat([options.headUp ?? Buffer.alloc(0), up.buffered ?? Buffer.alloc(0)]);
    let id: number;
    try {
      id = this.#addon.add(this.#relay, up.fd, down.fd, headUp, down.buffered);
    } finally {
      // The relay has its own descriptors (or none, on failure): Node's are closed either way.
      client.destroy();
      upstream.destroy();
    }
    this.#ends.set(id, options.onEnd);
    return { close: () => void this.#addon.close(this.#relay, id) };
  }

  /**
   * Starts the accept path on this relay's thread: from here on the bound of `maxConnections` is
   * counted here (acquire/release), for the connections it accepts and those Node accepts alike.
   */
  startFast(maxConnections: number, onEvent: (event: FastEvent) => void): void {
    this.#addon.fastStart(
      this.#relay,
      (kind, ...args) => {
        if (kind === 'handed') {
          onEvent({ kind, fd: args[0] as number, over: args[1] as boolean });
          return;
        }
        if (kind === 'tunnel' || kind === 'http') {
          const [fd, upstreamFd, name, address, port, started, method, via] = args as [
            number,
            number,
            string,
            string,
            number,
            number,
            string,
            'proxy' | 'transparent',
          ];
          if (kind === 'http') onEvent({ kind, fd, upstreamFd, name, address, port, started, method, via });
          else onEvent({ kind, fd, upstreamFd, name, address, port, started });
          return;
        }
        const [id, name, address, port, started, errno, via] = args as [
          number,
          string,
          string,
          number,
          number,
          number,
          'proxy' | 'transparent',
        ];
        onEvent({ kind: kind as 'started' | 'failed', id, name, address, port, started, errno, via });
      },
      maxConnections,
    );
  }

  /** A listening socket the accept path takes over (it closes it at stopFast). */
  listenFast(fd: number): void {
    this.#addon.fastListen(this.#relay, fd);
  }

  /**
   * `name` at `address`:`port` is allowed, and known to be there for `ttlMs` more; `connect`: an
   * explicit-proxy CONNECT to `name`:`port` (looked up by name and port, dialled at `address`); `http`:
   * the same for an explicit-proxy plain-HTTP GET or HEAD.
   */
  rememberFast(name: string, address: string, port: number, ttlMs: number, kind: FastEntryKind): void {
    this.#addon.fastRemember(this.#relay, name, address, port, ttlMs, ENTRY_KINDS[kind]);
  }

  /** Forgets every decision: what it allowed no longer starts through the accept path. */
  clearFast(): void {
    this.#addon.fastClear(this.#relay);
  }

  /** One of the sandbox's connection slots, or false when all are held. */
  acquire(): boolean {
    return this.#addon.fastAcquire(this.#relay);
  }

  release(): void {
    this.#addon.fastRelease(this.#relay);
  }

  stopFast(): void {
    this.#addon.fastStop(this.#relay);
  }

  /** A connection the accept path relays: its end arrives through `onEnd`. */
  track(id: number, onEnd: (end: RelayEnd) => void): Relayed {
    this.#ends.set(id, onEnd);
    return { close: () => void this.#addon.close(this.#relay, id) };
  }
}
