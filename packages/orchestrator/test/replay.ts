// A Kubernetes API server that answers with recorded responses: each test scripts the exchanges it
// expects (method, path, watch or not), the real @kubernetes/client-node talks to it over HTTP, and the
// test reads back every request the adapter made. A watch stream writes its recorded events one JSON line
// at a time, then ends or stays open until the server closes.
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

/** Replay time per resourceVersion step. */
const PACE_MS = 5;

export function fixture<T = unknown>(name: string): T {
  return JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8')) as T;
}

export interface Exchange {
  readonly method: string;
  readonly path: string;
  /** A watch request (`?watch=true`) rather than a plain one. */
  readonly watch?: boolean;
  readonly status?: number;
  readonly body?: unknown;
  /** Watch events, written one per line. */
  readonly events?: readonly unknown[];
  /** Keep the watch open after its events (until the server closes). */
  readonly hold?: boolean;
}

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: Record<string, string>;
  readonly body: unknown;
}

export class ReplayServer {
  readonly requests: RecordedRequest[] = [];
  /** Requests no scripted exchange matched. */
  readonly unexpected: RecordedRequest[] = [];
  private readonly pending: Exchange[];
  private readonly open = new Set<ServerResponse>();
  private server: Server | undefined;

  constructor(exchanges: readonly Exchange[]) {
    this.pending = [...exchanges];
  }

  async start(): Promise<KubeConfig> {
    this.server = createServer((req, res) => void this.answer(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    const config = new KubeConfig();
    config.loadFromOptions({
      clusters: [{ name: 'replay', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: 'api', token: 'recorded' }],
      contexts: [{ name: 'replay', cluster: 'replay', user: 'api', namespace: 'agentfense' }],
      currentContext: 'replay',
    });
    return config;
  }

  /** Exchanges scripted but never asked for. */
  get unused(): readonly Exchange[] {
    return this.pending;
  }

  async close(): Promise<void> {
    for (const res of this.open) res.end();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = new URL(req.url ?? '/', 'http://replay');
    const text = Buffer.concat(chunks).toString('utf8');
    const request: RecordedRequest = {
      method: req.method ?? '',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      body: text === '' ? undefined : (JSON.parse(text) as unknown),
    };
    this.requests.push(request);
    const isWatch = url.searchParams.get('watch') === 'true';
    const index = this.pending.findIndex(
      (e) => e.method === request.method && e.path === request.path && (e.watch ?? false) === isWatch,
    );
    if (index < 0) {
      this.unexpected.push(request);
      res.writeHead(500, { 'content-type': 'application/json' }).end('{}');
      return;
    }
    const [exchange] = this.pending.splice(index, 1);
    res.writeHead(exchange!.status ?? 200, { 'content-type': 'application/json' });
    if (exchange!.events === undefined) {
      res.end(JSON.stringify(exchange!.body));
      return;
    }
    // Events are paced by resourceVersion (PACE_MS per version after the one the watch asked from), so
    // two watches replayed at once interleave in the order the cluster wrote their events.
    const started = Date.now();
    const from = Number(request.query['resourceVersion'] ?? NaN);
    for (const event of exchange!.events) {
      const rv = Number(
        (event as { object?: { metadata?: { resourceVersion?: string } } }).object?.metadata?.resourceVersion,
      );
      const due = Number.isFinite(rv) && Number.isFinite(from) ? started + (rv - from) * PACE_MS : Date.now();
      await new Promise((resolve) => setTimeout(resolve, Math.max(1, due - Date.now())));
      res.write(`${JSON.stringify(event)}\n`);
    }
    if (exchange!.hold === true) this.open.add(res);
    else res.end();
  }
}
