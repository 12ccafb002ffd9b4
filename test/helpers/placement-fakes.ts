// Stand-ins for the cluster around a control plane opened with `placement`: an orchestrator that places
// at once (its watch can be told to report a sandbox lost and ready on another node), and a node agent
// that records every request and answers as its mode says. Both are real enough for the control plane:
// the orchestrator implements the four calls, the node agent is an HTTP server on loopback.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Location, Orchestrator, PlacementStatus } from '@agentfense/orchestrator';

export type AgentMode = 'ok' | 'echo' | 'redirect' | 'already-attached' | 'container-not-there';

export interface AgentRequest {
  readonly method: string;
  readonly url: string;
  readonly authorization: string | undefined;
  /** The request's body, as sent. */
  readonly body: string;
}

export interface FakeNodeAgent {
  readonly server: Server;
  /** Open sessions, `<sandbox id>/<session id>` → what the session's commands print (its `cd` kept). */
  readonly sessions: Map<string, { cwd: string }>;
  readonly port: number;
  readonly seen: AgentRequest[];
  mode: AgentMode;
  /** Where `redirect` sends every call. */
  redirectTo: number;
  /** What its audit route answers: the trail it keeps for any sandbox. */
  auditEvents: unknown[];
  close(): Promise<void>;
}

export async function startFakeNodeAgent(): Promise<FakeNodeAgent> {
  const agent = {
    seen: [] as AgentRequest[],
    mode: 'ok' as AgentMode,
    redirectTo: 0,
    sessions: new Map<string, { cwd: string }>(),
    auditEvents: [] as unknown[],
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => answer(req, res, Buffer.concat(chunks).toString()));
  });
  const answer = (req: IncomingMessage, res: ServerResponse, body: string): void => {
    agent.seen.push({
      method: req.method ?? '',
      url: req.url ?? '',
      authorization: req.headers.authorization,
      body,
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
      if (agent.mode === 'container-not-there') {
        // Once: the orchestrator said ready before the container reached this node's engine.
        agent.mode = 'ok';
        return json(404, { error: { code: 'AF_NOT_FOUND', message: 'no container for the sandbox' } });
      }
      return json(201, { sandboxId: 'x', container: 'c' });
    }
    if (req.method === 'GET' && req.url === '/v1/health') return json(200, { sandboxes: [] });
    if (agent.mode === 'ok' && req.method === 'GET' && /\/audit(\?|$)/.test(req.url ?? '')) {
      return json(200, { events: agent.auditEvents });
    }
    if (agent.mode === 'ok') {
      const session = sessionRequest(agent.sessions, req.method ?? '', req.url ?? '', body);
      if (session !== undefined) {
        if (req.url?.endsWith('/exec') === true && session.status === 200) {
          // A session command's answer: keep-alive blank lines, then the result.
          res.writeHead(200, { 'content-type': 'application/x-ndjson' });
          res.end(`\n${JSON.stringify({ result: session.body })}\n`);
          return;
        }
        return json(session.status, session.body);
      }
    }
    if (req.method === 'DELETE') return json(200, {});
    if (agent.mode === 'echo') {
      const header = req.headers.authorization ?? '';
      return json(403, {
        error: { code: 'AF_PERMISSION_DENIED', message: `refused ${header}`, details: { header } },
      });
    }
    if (agent.mode === 'redirect') {
      res.writeHead(307, { location: `http://127.0.0.1:${agent.redirectTo}${req.url ?? '/'}` });
      res.end();
      return;
    }
    if (req.url?.endsWith('/exec') === true) {
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write(`${JSON.stringify({ stdout: Buffer.from('hi\n').toString('base64') })}\n`);
      const exit = { exitCode: 0, signal: null, timedOut: false, oomKilled: false, durationMs: 1 };
      res.end(`${JSON.stringify({ exit })}\n`);
      return;
    }
    json(200, { diff: '', binary: [] });
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return Object.assign(agent, {
    server,
    port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

const SESSIONS = /^\/v1\/sandboxes\/([^/]+)\/sessions(?:\/([^/]+))?(\/exec)?$/;

/**
 * The node agent's session routes, as a stand-in: a session keeps its `cd` between commands, and a
 * command prints `<cwd> <command>`; a session is found only under the sandbox that opened it.
 */
function sessionRequest(
  sessions: Map<string, { cwd: string }>,
  method: string,
  url: string,
  body: string,
): { status: number; body: unknown } | undefined {
  const m = SESSIONS.exec(url);
  if (m === null) return undefined;
  const [, sandboxId, sessionId, exec] = m;
  const input = (body === '' ? {} : JSON.parse(body)) as { id?: string; command?: string };
  const info = (id: string) => ({
    id,
    sandboxId,
    shell: '/bin/sh',
    status: 'open',
    closedReason: null,
    createdAt: new Date(0).toISOString(),
    lastActiveAt: new Date(0).toISOString(),
  });
  const prefix = `${sandboxId}/`;
  if (sessionId === undefined) {
    if (method === 'POST') {
      sessions.set(`${prefix}${input.id}`, { cwd: '/workspace' });
      return { status: 201, body: info(input.id ?? '') };
    }
    const mine = [...sessions.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
    return { status: 200, body: { sessions: mine.map(info) } };
  }
  const session = sessions.get(`${prefix}${sessionId}`);
  if (session === undefined) {
    return {
      status: 404,
      body: { error: { code: 'AF_NOT_FOUND', message: `session ${sessionId} not found` } },
    };
  }
  if (method === 'DELETE') {
    sessions.delete(`${prefix}${sessionId}`);
    return { status: 200, body: {} };
  }
  if (exec === undefined) return { status: 200, body: info(sessionId) };
  const command = input.command ?? '';
  if (command.startsWith('cd ')) session.cwd = command.slice(3);
  const out = Buffer.from(`${session.cwd} ${command}\n`).toString('base64');
  const result = { stdout: out, stderr: '', exitCode: 0, durationMs: 1, timedOut: false, truncated: false };
  return { status: 200, body: { ...result, sessionClosed: false } };
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
