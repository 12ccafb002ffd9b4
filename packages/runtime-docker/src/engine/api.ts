// The Docker Engine API over its socket, with undici: one connection pool per engine (a `Client` keeps
// its keep-alive connections), JSON requests, and hijacked exec streams (`upgrade`). The engine's own
// error message travels in EngineApiError; engine.ts maps it to AgentFense errors.
//
// Why undici and not dockerode (docs/decisions.md, "Docker is driven through the Engine API with undici"):
// the same exec round trip measured within noise for both (the engine's runc exec dominates), undici has no
// dependencies and loads in half the time, and the exec stream is demultiplexed here with backpressure
// (dockerode's demuxStream ignores it). The request/response shapes are typed from @types/dockerode (types
// only).
import type { Duplex } from 'node:stream';
import { Client } from 'undici';
import { InvalidArgumentError, UnavailableError } from '@agentfense/protocol';

/** Docker's default engine address. */
export const DEFAULT_DOCKER_HOST = 'unix:///var/run/docker.sock';
/** The API version we speak (Docker 20.10+; Debian bookworm ships 20.10.24, API 1.41). */
export const API_VERSION = 'v1.41';

/** An error answer of the engine: its HTTP status and its own message. */
export class EngineApiError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'EngineApiError';
    this.status = status;
  }
}

/** The engine could not be reached at all (no socket, refused, no permission, timed out). */
export class EngineUnreachableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EngineUnreachableError';
  }
}

export interface RequestOptions {
  readonly query?: Readonly<Record<string, string | number | boolean>>;
  readonly body?: unknown;
  readonly timeoutMs?: number;
}

/** One engine: the pool and the address it talks to. */
export interface EngineApi {
  /** Where the engine is (`unix:///…` or `tcp://…`), for messages. */
  readonly host: string;
  /** A JSON request; resolves to the parsed body (undefined for an empty one); rejects with EngineApiError. */
  request<T>(method: string, path: string, options?: RequestOptions): Promise<T>;
  /** A hijacked connection (`POST /exec/{id}/start`): the raw multiplexed stream, both directions. */
  upgrade(path: string, body: unknown): Promise<Duplex>;
  close(): Promise<void>;
}

/** Parses DOCKER_HOST (`unix:///path`, `tcp://host:port`) into undici's origin and socket path. */
export function parseDockerHost(host: string): { origin: string; socketPath?: string } {
  if (host.startsWith('unix://')) {
    const socketPath = host.slice('unix://'.length);
    if (!socketPath.startsWith('/')) {
      throw new InvalidArgumentError(
        `DOCKER_HOST ${JSON.stringify(host)}: a unix socket path must be absolute`,
      );
    }
    return { origin: 'http://docker', socketPath };
  }
  const tcp = /^(?:tcp|http):\/\/([A-Za-z0-9.[\]:-]+)$/.exec(host);
  if (tcp !== null) return { origin: `http://${tcp[1] ?? ''}` };
  throw new InvalidArgumentError(
    `DOCKER_HOST ${JSON.stringify(host)} is not supported: use unix:///path/to/docker.sock or tcp://host:port ` +
      '(TLS and ssh:// engines are not supported by the runtime)',
  );
}

/** Opens the pool for `dockerHost` (default: DOCKER_HOST, else docker's default socket). Connects lazily. */
export function createEngineApi(dockerHost?: string): EngineApi {
  const host = dockerHost ?? process.env['DOCKER_HOST'] ?? DEFAULT_DOCKER_HOST;
  const { origin, socketPath } = parseDockerHost(host);
  const client = new Client(origin, {
    ...(socketPath === undefined ? {} : { socketPath }),
    // Long-lived keep-alive connections: every request after the first skips the connect.
    keepAliveTimeout: 30_000,
    // A container start or a removal can take long on a loaded host; callers set their own deadlines.
    headersTimeout: 0,
    bodyTimeout: 0,
  });
  const unreachable = (err: unknown): never => {
    if (err instanceof EngineApiError) throw err;
    throw new EngineUnreachableError(`no Docker engine answers at ${host}: ${(err as Error).message}`, {
      cause: err,
    });
  };
  return {
    host,
    async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
      const query =
        options.query === undefined
          ? ''
          : `?${new URLSearchParams(Object.entries(options.query).map(([k, v]): [string, string] => [k, String(v)])).toString()}`;
      const signal = options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs);
      const response = await client
        .request({
          method: method as 'GET',
          path: `/${API_VERSION}${path}${query}`,
          ...(options.body === undefined
            ? {}
            : { body: JSON.stringify(options.body), headers: { 'content-type': 'application/json' } }),
          ...(signal === undefined ? {} : { signal }),
        })
        .catch(unreachable);
      const text = await response.body.text().catch(unreachable);
      if (response.statusCode >= 400) {
        throw new EngineApiError(response.statusCode, engineMessage(text));
      }
      return (text === '' ? undefined : (JSON.parse(text) as T)) as T;
    },
    async upgrade(path: string, body: unknown): Promise<Duplex> {
      const { socket } = await client
        .upgrade({
          method: 'POST',
          path: `/${API_VERSION}${path}`,
          protocol: 'tcp',
          headers: { 'content-type': 'application/json' },
          // undici sends a body with an upgrade request; its types only omit it.
          ...({ body: JSON.stringify(body) } as object),
        })
        .catch((err: unknown) => {
          // A refused upgrade comes back as a plain HTTP error: undici reports it as a SocketError or
          // an "unexpected status"; the caller maps it through its own inspect.
          return unreachable(err);
        });
      return socket;
    },
    close: () => client.close(),
  };
}

/** The engine's `{"message": …}` error body as text (or the raw body). */
function engineMessage(text: string): string {
  try {
    const parsed = JSON.parse(text) as { message?: unknown };
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    // not JSON: the raw text is the message
  }
  return text.trim() || 'no message';
}

/** UnavailableError for an unreachable engine, naming where and how to get one. */
export function unreachableEngine(host: string, said: string, setupCommand: string): UnavailableError {
  return new UnavailableError(
    `no Docker engine answers at ${host} (${said}): start one — \`${setupCommand}\` can start ` +
      `Debian's dockerd with safe flags — or point DOCKER_HOST at a running engine`,
    { details: { engine: host } },
  );
}
