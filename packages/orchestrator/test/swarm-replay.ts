// A Swarm manager that answers with recorded Engine API responses (test/fixtures/swarm/, captured from
// the three-node Swarm the system test builds), on a Unix socket as dockerd does. runtime-docker's real
// client talks to it; each test scripts the exchanges and reads back every request the adapter made.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEngineApi, type EngineApi } from '@agentfense/runtime-docker';
import { SwarmOrchestrator, swarmApiFrom, type SwarmOrchestratorOptions } from '../src/swarm/index.js';

export const SANDBOX_A = 'sb_3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b0c';
export const SANDBOX_B = 'sb_00000000-0000-4000-8000-00000000000b';
export const SANDBOX_C = 'sb_00000000-0000-4000-8000-00000000000c';
export const SANDBOX_D = 'sb_00000000-0000-4000-8000-00000000000d';
export const SANDBOX_E = 'sb_00000000-0000-4000-8000-00000000000e';
export const NODE_LABEL = 'agentfense.node-agent';

export function swarmFixture<T = unknown>(name: string): T {
  return JSON.parse(readFileSync(new URL(`./fixtures/swarm/${name}`, import.meta.url), 'utf8')) as T;
}

export interface EngineExchange {
  readonly method: string;
  /** Without the API version prefix, e.g. `/services/create`. */
  readonly path: string;
  readonly status?: number;
  /** A JSON body, or raw text (`raw`). */
  readonly body?: unknown;
  readonly raw?: string;
}

/** An exchange from a recorded `{ status, body }` fixture. */
export function recorded(method: string, path: string, name: string): EngineExchange {
  const { status, body } = swarmFixture<{ status: number; body: unknown }>(name);
  return { method, path, status, body };
}

export interface EngineRequest {
  readonly method: string;
  readonly path: string;
  readonly query: Record<string, string>;
  readonly body: unknown;
}

export class EngineReplay {
  readonly requests: EngineRequest[] = [];
  readonly unexpected: EngineRequest[] = [];
  private readonly pending: EngineExchange[];
  private server: Server | undefined;
  private readonly dir = mkdtempSync(join(tmpdir(), 'af-swarm-replay-'));
  readonly socket = join(this.dir, 'docker.sock');

  constructor(exchanges: readonly EngineExchange[]) {
    this.pending = [...exchanges];
  }

  async start(): Promise<EngineApi> {
    this.server = createServer((req, res) => void this.answer(req, res));
    await new Promise<void>((resolve) => this.server!.listen(this.socket, resolve));
    return createEngineApi(`unix://${this.socket}`);
  }

  get unused(): readonly EngineExchange[] {
    return this.pending;
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const url = new URL(req.url ?? '/', 'http://docker');
    const text = Buffer.concat(chunks).toString('utf8');
    const request: EngineRequest = {
      method: req.method ?? '',
      path: url.pathname.replace(/^\/v1\.\d+/, ''),
      query: Object.fromEntries(url.searchParams),
      body: text === '' ? undefined : (JSON.parse(text) as unknown),
    };
    this.requests.push(request);
    const index = this.pending.findIndex((e) => e.method === request.method && e.path === request.path);
    if (index < 0) {
      this.unexpected.push(request);
      res.writeHead(500, { 'content-type': 'application/json' }).end('{"message":"not scripted"}');
      return;
    }
    const [exchange] = this.pending.splice(index, 1);
    res.writeHead(exchange!.status ?? 200, { 'content-type': 'application/json' });
    res.end(exchange!.raw ?? JSON.stringify(exchange!.body));
  }
}

/** The adapter against a replayed manager, as the API tier would build it against a real one. */
export async function swarmReplay(
  exchanges: readonly EngineExchange[],
  options: Partial<Omit<SwarmOrchestratorOptions, 'api'>> = {},
): Promise<{ replay: EngineReplay; adapter: SwarmOrchestrator; errors: unknown[]; engine: EngineApi }> {
  const replay = new EngineReplay(exchanges);
  const engine = await replay.start();
  const errors: unknown[] = [];
  const adapter = new SwarmOrchestrator({
    api: swarmApiFrom(engine),
    nodeAgent: { port: 7300, nodeLabel: NODE_LABEL },
    pollIntervalMs: 5,
    onError: (error) => errors.push(error),
    ...options,
  });
  return { replay, adapter, errors, engine };
}
