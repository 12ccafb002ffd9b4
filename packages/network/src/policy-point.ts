// One sandbox's policy point: listeners opened inside its network namespace (the process itself stays
// in the host's, where it dials out), the explicit and transparent proxy on 127.0.0.1:3128 / [::1]:3128
// and the DNS server on port 53 (UDP and TCP). The namespace's NAT sends every TCP connection and DNS
// question here; the agent can neither configure nor bypass it (it has no capability in a namespace of
// the host's user namespace).
import { createSocket } from 'node:dgram';
import type { Socket as UdpSocket } from 'node:dgram';
import { closeSync, openSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import type { NetworkAuditSink } from './audit.js';
import { FlowContext } from './context.js';
import { answerDns } from './dns-answer.js';
import { HttpFlows } from './http-proxy.js';
import { FastAccept, networkFeatureOn } from './fast-accept.js';
import { Interceptor } from './intercept.js';
import { netnsAddon, socketFd } from './native.js';
import { DNS_PORT, PROXY_PORT } from './netns.js';
import type { NetworkPolicy } from './policy.js';
import { Resolver } from './resolver.js';
import { SecretSet } from './secret-set.js';
import type { SecretSetOptions } from './secret-set.js';
import type { SandboxSecret } from './secrets.js';
import { handleTransparent } from './transparent.js';
import type { TransparentHooks } from './transparent.js';

export interface PolicyPointOptions {
  /** The bind-mounted namespace file (netns.ts). */
  readonly netnsPath: string;
  readonly policy: NetworkPolicy;
  /** Open connections allowed at once; more are refused (and audited). */
  readonly maxConnections: number;
  readonly hostsFile?: string;
  /** Resolves names in place of one made from `hostsFile` (tests give one whose answers change). */
  readonly resolver?: Resolver;
  readonly audit: NetworkAuditSink;
  /** The sandbox's secrets and CA: TLS to a bound host is intercepted (intercept.ts). */
  readonly secrets?: SecretSetOptions;
}

/** How long a refused proxy client may take to read its 503 before it is reset. */
const REFUSAL_LINGER_MS = 1_000;

/**
 * Why a connection past the bound is refused, with how to raise it: the ControlPlane option
 * `network.maxConnections`, or AGENTFENSE_NETWORK_MAX_CONNECTIONS for the CLI and `serve`.
 */
export function connectionBoundReason(maxConnections: number): string {
  return (
    `the sandbox already has ${maxConnections} connections open (its limit): close some, or raise the ` +
    `bound (network.maxConnections; AGENTFENSE_NETWORK_MAX_CONNECTIONS for the CLI and serve)`
  );
}

/** A connection that dialled the proxy's own address: a client of the explicit proxy. */
function isProxyItself(target: { address: string; port: number }): boolean {
  return target.port === PROXY_PORT && (target.address === '127.0.0.1' || target.address === '::1');
}

/** DNS questions over one TCP connection answered ahead of the client reading them. */
const DNS_TCP_AHEAD = 16;

export class PolicyPoint {
  readonly #ctx: FlowContext;
  readonly #http: HttpFlows;
  readonly #servers: Server[] = [];
  readonly #udp: UdpSocket[] = [];
  readonly #intercept: TransparentHooks['intercept'];
  /** Connections the NAT redirected (the rest came through the explicit proxy). */
  readonly #via = new WeakMap<Socket, 'transparent'>();
  /** The accept path in C where the relay loads (off with AGENTFENSE_NETWORK_DISABLE=fastAccept). */
  readonly #fast: FastAccept | undefined;

  constructor(options: PolicyPointOptions) {
    this.#ctx = new FlowContext({
      policy: options.policy,
      resolver:
        options.resolver ??
        new Resolver(options.hostsFile === undefined ? {} : { hostsFile: options.hostsFile }),
      maxConnections: options.maxConnections,
      audit: options.audit,
      ...(options.secrets === undefined ? {} : { secrets: new SecretSet(options.secrets) }),
    });
    const interceptor = new Interceptor(this.#ctx);
    this.#intercept = (client, head, target, decision) => {
      const set = this.#ctx.secrets;
      if (set === undefined || !set.bound(target.name)) return false;
      interceptor.take({ set, client, head, target, via: this.#via.get(client) ?? 'proxy', decision });
      return true;
    };
    this.#fast = networkFeatureOn('fastAccept', process.env)
      ? FastAccept.start(this.#ctx, {
          connection: (socket) => this.#proxyConnection(socket),
          overBound: (socket) =>
            this.#refuseOverBound(socket, connectionBoundReason(this.#ctx.maxConnections)),
          tunnel: (client, upstream, dest) => this.#http.resumeConnect(client, upstream, dest),
          http: (client, upstream, dest, via) => this.#http.resumeRequest(client, upstream, dest, via),
        })
      : undefined;
    const fast = this.#fast;
    // The explicit proxy's CONNECT decisions go to the C path's table only when fastConnect is on.
    const connectInC = fast !== undefined && networkFeatureOn('fastConnect', process.env);
    const httpInC = fast !== undefined && networkFeatureOn('fastHttp', process.env);
    const transparentHttpInC = fast !== undefined && networkFeatureOn('fastTransparentHttp', process.env);
    this.#http = new HttpFlows(
      this.#ctx,
      this.#intercept,
      connectInC ? (dest, decision) => fast.remember(dest, decision, 'proxy') : undefined,
      {
        ...(httpInC ? { proxy: (dest, decision) => fast.remember(dest, decision, 'http') } : {}),
        ...(transparentHttpInC
          ? { transparent: (dest, decision) => fast.remember(dest, decision, 'transparentHttp') }
          : {}),
      },
    );
    const ns = openSync(options.netnsPath, 'r');
    try {
      const addon = netnsAddon();
      const open = (family: 4 | 6, type: 'tcp' | 'udp', address: string, port: number): number =>
        addon.openInNetns(ns, family, type, address, port);
      for (const [family, address] of [
        [4, '127.0.0.1'],
        [6, '::1'],
      ] as const) {
        let proxy: number;
        try {
          proxy = open(family, 'tcp', address, PROXY_PORT);
        } catch (err) {
          // A namespace without IPv6 (Docker's) has no [::1]: nothing can be dialled over IPv6 there.
          if (family === 6) continue;
          throw err;
        }
        if (this.#fast !== undefined) this.#fast.listen(proxy);
        else this.#listen(proxy, (s) => this.#proxyConnection(s));
        this.#listen(open(family, 'tcp', address, DNS_PORT), (s) => this.#dnsOverTcp(s));
        this.#dnsUdp(open(family, 'udp', address, DNS_PORT), family);
      }
    } finally {
      closeSync(ns);
    }
  }

  setPolicy(policy: NetworkPolicy): number {
    return this.#ctx.setPolicy(policy);
  }

  /** Gives or replaces a secret's value; false when this point intercepts nothing (no CA). */
  setSecret(secret: SandboxSecret): boolean {
    const set = this.#ctx.secrets;
    if (set === undefined) return false;
    set.put(secret);
    // A host now bound to a secret is intercepted: no decision made before may skip that.
    this.#fast?.forget();
    return true;
  }

  /**
   * Open connections, accepted ones, how many of all so far the C accept path carried, and how many
   * plain-HTTP requests it sent: the explicit proxy's (fastHttp) and redirected ones'
   * (fastTransparentHttp).
   */
  stats(): {
    connections: number;
    clients: number;
    fast: number;
    fastHttp: number;
    fastTransparentHttp: number;
  } {
    return {
      connections: this.#ctx.open.size,
      clients: this.#ctx.clients.size,
      fast: this.#fast?.started ?? 0,
      fastHttp: this.#fast?.requests ?? 0,
      fastTransparentHttp: this.#fast?.transparentRequests ?? 0,
    };
  }

  close(): void {
    this.#fast?.stop();
    for (const server of this.#servers) server.close();
    for (const socket of this.#udp) socket.close();
    for (const client of this.#ctx.clients) client.destroy();
  }

  #listen(fd: number, onConnection: (socket: Socket) => void): void {
    const server = createServer({ pauseOnConnect: true, noDelay: true }, (socket) => {
      const { clients, maxConnections } = this.#ctx;
      if (!clients.admit(socket)) {
        this.#refuseOverBound(socket, connectionBoundReason(maxConnections));
        return;
      }
      socket.once('close', () => clients.leave(socket));
      socket.on('error', () => socket.destroy());
      onConnection(socket);
    });
    server.listen({ fd });
    this.#servers.push(server);
  }

  /**
   * A connection past the bound: audited with the reason; a client of the explicit proxy is told it in
   * a 503 (curl prints it), any other is reset (a TLS or raw client has no way to be told in-band).
   */
  #refuseOverBound(socket: Socket, reason: string): void {
    socket.on('error', () => socket.destroy());
    let target: { address: string; port: number } | undefined;
    try {
      target = netnsAddon().originalDestination(socketFd(socket));
    } catch {
      target = undefined; // not a redirected TCP connection (DNS over TCP): reset below
    }
    this.#ctx.record(target ?? { port: 0 }, 'transparent', { allowed: false, reason });
    if (target !== undefined && isProxyItself(target)) {
      const body = `AgentFense network policy refused the connection: ${reason}\n`;
      socket.end(
        `HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
      // A client that does not read its answer is reset: a refused socket holds nothing for long.
      socket.setTimeout(REFUSAL_LINGER_MS, () => socket.destroy());
      return;
    }
    socket.destroy();
  }

  #proxyConnection(socket: Socket): void {
    let target: { address: string; port: number };
    try {
      target = netnsAddon().originalDestination(socketFd(socket));
    } catch {
      socket.destroy();
      return;
    }
    // Dialled 127.0.0.1:3128 / [::1]:3128 itself: a client of the explicit proxy.
    if (isProxyItself(target)) {
      this.#http.takeProxyClient(socket);
      socket.resume();
      return;
    }
    this.#via.set(socket, 'transparent');
    const fast = this.#fast;
    void handleTransparent(this.#ctx, socket, target, {
      http: (client, to, early) => {
        this.#http.takeTransparent(client, to, early);
        client.resume();
      },
      ...(this.#intercept === undefined ? {} : { intercept: this.#intercept }),
      ...(fast === undefined ? {} : { allowedTls: (dest, decision) => fast.remember(dest, decision) }),
    });
  }

  #dnsUdp(fd: number, family: 4 | 6): void {
    const socket = createSocket(family === 4 ? 'udp4' : 'udp6');
    socket.on('message', (query, from) => {
      void this.#answer(query).then((response) => {
        if (response !== null) socket.send(response, from.port, from.address);
      });
    });
    socket.on('error', () => undefined);
    socket.bind({ fd });
    this.#udp.push(socket);
  }

  /**
   * DNS over TCP: two-byte length prefixes, answered in order. Back-pressure: at most DNS_TCP_AHEAD
   * questions are answered ahead of a client, and none while its answers wait to be written, so a
   * client that pipelines questions and never reads holds its own socket buffers, not our memory.
   */
  #dnsOverTcp(socket: Socket): void {
    let buffered: Buffer = Buffer.alloc(0);
    let chain = Promise.resolve();
    let pending = 0;
    const pump = (): void => {
      while (
        pending < DNS_TCP_AHEAD &&
        buffered.length >= 2 &&
        buffered.length >= 2 + buffered.readUInt16BE(0)
      ) {
        const query = Buffer.from(buffered.subarray(2, 2 + buffered.readUInt16BE(0)));
        buffered = buffered.subarray(2 + query.length);
        pending++;
        chain = chain.then(async () => {
          try {
            const response = await this.#answer(query);
            if (response === null || socket.destroyed) return;
            const length = Buffer.alloc(2);
            length.writeUInt16BE(response.length);
            socket.write(Buffer.concat([length, response]));
          } catch {
            // An answer that could not be made ends this connection, not the ones after it.
            socket.destroy();
          } finally {
            pending--;
            pump();
          }
        });
      }
      // Read on only while few questions wait and the client takes its answers.
      const held = pending >= DNS_TCP_AHEAD || socket.writableNeedDrain || buffered.length >= 2 + 65_535;
      if (held) socket.pause();
      else socket.resume();
    };
    socket.on('data', (chunk: Buffer) => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      pump();
    });
    socket.on('drain', pump);
    socket.resume();
  }

  async #answer(query: Buffer): Promise<Buffer | null> {
    const outcome = await answerDns(query, () => this.#ctx.policy, this.#ctx.resolver);
    if (outcome.name !== undefined && outcome.decision !== undefined && !outcome.decision.allowed) {
      this.#ctx.recordDns(outcome.name, outcome.decision);
    }
    return outcome.response;
  }
}
