// Stand-ins for the cluster around a control plane opened with `placement`: an orchestrator that places
// at once (its watch can be told to report a sandbox lost and ready on another node), and a node agent
// that records every request and answers as its mode says. Both are real enough for the control plane:
// the orchestrator implements the four calls, the node agent is an HTTP server on loopback.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Location, Orchestrator, PlacementStatus } from '@agentfense/orchestrator';

export type AgentMode = 'ok' | 'echo' | 'redirect' | 'already-attached';

export interface AgentRequest {
  readonly method: string;
  readonly url: string;
  readonly authorization: string | undefined;
}

export interface FakeNodeAgent {
  readonly server: Server;
  readonly port: number;
  readonly seen: AgentRequest[];
  mode: AgentMode;
  /** Where `redirect` sends every call. */
  redirectTo: number;
  close(): Promise<void>;
}

export async function startFakeNodeAgent(): Promise<FakeNodeAgent> {
  const agent = { seen: [] as AgentRequest[], mode: 'ok' as AgentMode, redirectTo: 0 };
  const server = createServer((req, res) => {
    req.resume();
    agent.seen.push({
      method: req.method ?? '',
      url: req.url ?? '',
      authorization: req.headers.authorization,
    });
    const json = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method === 'POST' && req.url === '/v1/sandboxes') {
      if (agent.mode === 'already-attached') {
        // Once: a stale attach, detached by the caller before it attaches again.
        agent.mode = 'ok';
        return json(409, { error: { code: 'AF_ALREADY_EXISTS', message: 'already attached on this node' } });
      }
      return json(201, { sandboxId: 'x', container: 'c' });
    }
    if (req.method === 'GET' && req.url === '/v1/health') return json(200, { sandboxes: [] });
    if (req.method === 'DELETE') return json(200, {});
    if (agent.mode === 'echo') {
      const header = req.headers.authorization ?? '';
      return json(403, {
        error: { code: 'AF_PERMISSION_DENIED', message: `refused ${header}`, details: { header } },
      });
    }
    if (agent.mode === 'redirect') {
      res.writeHead(307, { location: `http://127.0.0.1:${agent.redirectTo}${req.url ?? '/'}` });
      return res.end();
    }
    if (req.url?.endsWith('/exec') === true) {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write(`${JSON.stringify({ stdout: Buffer.from('hi\n').toString('base64') })}\n`);
      const exit = { exitCode: 0, signal: null, timedOut: false, oomKilled: false, durationMs: 1 };
      return res.end(`${JSON.stringify({ exit })}\n`);
    }
    json(200, { diff: '', binary: [] });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return Object.assign(agent, {
    server,
    port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

export interface FakeOrchestrator extends Orchestrator {
  readonly placed: ReadonlySet<string>;
  /** Every watch reports `status` next. */
  report(status: PlacementStatus): void;
  /** Where `locate` sends a sandbox's calls from now on. */
  nodeAgentPort: number;
  /** `place` fails with this, or the watch reports the sandbox lost for good. */
  failing: 'no' | 'lost';
}

export function fakeOrchestrator(nodeAgentPort: number): FakeOrchestrator {
  const placed = new Set<string>();
  const queued: PlacementStatus[][] = [];
  // A watch starts with each sandbox's current status, as the adapters' do.
  const current = new Map<string, PlacementStatus>();
  const fake: FakeOrchestrator = {
    placed,
    nodeAgentPort,
    failing: 'no',
    report: (status) => {
      current.set(status.sandboxId, status);
      for (const queue of queued) queue.push(status);
    },
    place: (r) => {
      placed.add(r.sandboxId);
      const status: PlacementStatus =
        fake.failing === 'lost'
          ? {
              state: 'lost',
              sandboxId: r.sandboxId,
              reason: 'failed',
              nodeName: undefined,
              detail: 'refused',
              replaced: false,
            }
          : { state: 'ready', sandboxId: r.sandboxId, nodeName: 'n1', podIP: '10.0.0.2' };
      fake.report(status);
      return Promise.resolve();
    },
    remove: (id) => {
      placed.delete(id);
      current.delete(id);
      return Promise.resolve();
    },
    locate: (id): Promise<Location | undefined> =>
      Promise.resolve(
        placed.has(id)
          ? {
              sandboxId: id,
              nodeName: 'n1',
              podIP: '10.0.0.2',
              nodeAgent: { host: '127.0.0.1', port: fake.nodeAgentPort },
            }
          : undefined,
      ),
    async *watch({ signal } = {}): AsyncIterable<PlacementStatus> {
      const queue: PlacementStatus[] = [...current.values()];
      queued.push(queue);
      try {
        while (signal?.aborted !== true) {
          const next = queue.shift();
          if (next !== undefined) yield next;
          else await new Promise((resolve) => setTimeout(resolve, 10));
        }
      } finally {
        queued.splice(queued.indexOf(queue), 1);
      }
    },
  };
  return fake;
}
