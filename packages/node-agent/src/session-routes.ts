// The node agent's session routes: open, list, read, run a command in, close. A command's answer is
// NDJSON like exec's: blank lines while it runs (so no proxy or client idles the connection out on a long
// command), then one {"result": …} line, or {"error": …}.
import type { ServerResponse } from 'node:http';
import { InvalidArgumentError } from '@agentfense/protocol';
import type { SessionExecResult, SessionInfo, SessionShell } from '@agentfense/sessions';
import type { NodeAgentCore } from './agent.js';
import { bytesField, optionalNumber, readJson, sendJson, stringRecord } from './http-io.js';
import type { Route } from './route.js';

/** How often a running session command's answer gets a blank line. */
const KEEPALIVE_MS = 15_000;

const SB = '/v1/sandboxes/([^/]+)';

export function sessionToJson(info: SessionInfo): Record<string, unknown> {
  return {
    ...info,
    createdAt: info.createdAt.toISOString(),
    lastActiveAt: info.lastActiveAt.toISOString(),
  };
}

function resultToJson(r: SessionExecResult): Record<string, unknown> {
  return { ...r, stdout: r.stdout.toString('base64'), stderr: r.stderr.toString('base64') };
}

function optionalString(value: unknown, name: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new InvalidArgumentError(`${name}: a string`);
  return value;
}

function keepAlive(res: ServerResponse): () => void {
  const timer = setInterval(() => res.write('\n'), KEEPALIVE_MS);
  return () => clearInterval(timer);
}

export function sessionRoutes(core: NodeAgentCore): Route[] {
  const sandbox = (params: readonly string[]): ReturnType<NodeAgentCore['sandbox']> =>
    core.sandbox(decodeURIComponent(params[0] ?? ''));
  const sid = (params: readonly string[]): string => decodeURIComponent(params[1] ?? '');
  return [
    [
      'POST',
      new RegExp(`^${SB}/sessions$`),
      async ({ req, res, params }) => {
        const body = await readJson(req);
        const env = stringRecord(body['env'], 'env');
        const id = optionalString(body['id'], 'id');
        const shell = optionalString(body['shell'], 'shell') as SessionShell | undefined;
        const cwd = optionalString(body['cwd'], 'cwd');
        const idle = optionalNumber(body['idleTimeoutMs'], 'idleTimeoutMs');
        const info = await sandbox(params).sessions.open({
          ...(id === undefined ? {} : { id }),
          ...(shell === undefined ? {} : { shell }),
          ...(cwd === undefined ? {} : { cwd }),
          ...(env === undefined ? {} : { env }),
          ...(idle === undefined ? {} : { idleTimeoutMs: idle }),
        });
        sendJson(res, 201, sessionToJson(info));
      },
    ],
    [
      'GET',
      new RegExp(`^${SB}/sessions$`),
      ({ res, params }) =>
        Promise.resolve(sendJson(res, 200, { sessions: sandbox(params).sessions.list().map(sessionToJson) })),
    ],
    [
      'GET',
      new RegExp(`^${SB}/sessions/([^/]+)$`),
      ({ res, params }) =>
        Promise.resolve(sendJson(res, 200, sessionToJson(sandbox(params).sessions.get(sid(params)).info()))),
    ],
    [
      'POST',
      new RegExp(`^${SB}/sessions/([^/]+)/exec$`),
      async ({ req, res, params }) => {
        const body = await readJson(req);
        const command = body['command'];
        if (typeof command !== 'string') throw new InvalidArgumentError('command: a string');
        const stdin = bytesField(body, 'stdin');
        const timeoutMs = optionalNumber(body['timeoutMs'], 'timeoutMs');
        const session = sandbox(params).sessions.get(sid(params));
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        const stop = keepAlive(res);
        try {
          const result = await session.run(command, {
            encoding: 'buffer',
            ...(stdin === undefined ? {} : { stdin }),
            ...(timeoutMs === undefined ? {} : { timeoutMs }),
          });
          res.end(`${JSON.stringify({ result: resultToJson(result) })}\n`);
        } finally {
          stop();
        }
      },
    ],
    [
      'DELETE',
      new RegExp(`^${SB}/sessions/([^/]+)$`),
      async ({ res, params }) => {
        await sandbox(params).sessions.close(sid(params));
        sendJson(res, 200, {});
      },
    ],
  ];
}
