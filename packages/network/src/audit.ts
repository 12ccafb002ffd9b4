// The policy point's records, one per connection (or plain-HTTP request) and per refused DNS question,
// appended to the sandbox's audit trail beside the file decisions.

export interface NetworkAuditEvent {
  /** Milliseconds since the epoch, when the connection was decided. */
  readonly time: number;
  /**
   * `connect`: a TCP connection or plain-HTTP request; `dns`: a question answered NXDOMAIN; `secret`: a
   * request a secret's value was put into (`secret` names it); `secret-set`: the control plane gave a
   * secret a value (`secret` names it, `via` is `control`).
   */
  readonly op: 'connect' | 'dns' | 'secret' | 'secret-set';
  /** `name:port` (or `address:port` when no name is known); the name for DNS. */
  readonly path: string;
  readonly decision: 'allow' | 'deny';
  /** Index of the deciding rule in the sandbox's network rules. */
  readonly rule?: number;
  readonly reason: string;
  readonly name?: string;
  readonly address?: string;
  readonly port?: number;
  readonly method?: string;
  /**
   * How it arrived: through the proxy variables (`proxy`), redirected (`transparent`), or `dns`;
   * `control`: a call to the control plane, not the sandbox's traffic.
   */
  readonly via: 'proxy' | 'transparent' | 'dns' | 'control';
  readonly bytesUp?: number;
  readonly bytesDown?: number;
  readonly durationMs?: number;
  /** The secret's name (ops `secret`, `secret-set`); never its value. */
  readonly secret?: string;
}

export type NetworkAuditSink = (event: NetworkAuditEvent) => void;

/** `name:port`, or `[v6]:port` / `v4:port` without a name. */
export function destinationLabel(
  name: string | undefined,
  address: string | undefined,
  port: number,
): string {
  const host = name ?? address ?? '?';
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
