// The node agent's HTTP face for the API tier. Every /v1 route needs the token; /live and /ready (the
// orchestrator's probes) answer a bare status and nothing else. An exec answers with NDJSON lines: output
// chunks as they come ({"stdout": base64} / {"stderr": base64}), then one {"exit": …} line; a client that
// goes away aborts the command.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import {
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
  type CommitMode,
} from '@agentfense/protocol';
import type { NodeAgentCore } from './agent.js';
import type { Route } from './route.js';
import { sessionRoutes } from './session-routes.js';
import {
  bytesField,
  optionalNumber,
  readJson,
  sendError,
  sendJson,
  stringArray,
  stringRecord,
} from './http-io.js';

const SB = '/v1/sandboxes/([^/]+)';

function rulesOf(value: unknown): readonly never[] {
  if (!Array.isArray(value)) throw new InvalidArgumentError('rules: an array of rules');
  return value as never[];
}

/** An audit query from the URL: `decision` (allow or deny) and `limit` (a positive integer). */
function auditQuery(query: URLSearchParams): { decision?: 'allow' | 'deny'; limit?: number } {
  const decision = query.get('decision');
  if (decision !== null && decision !== 'allow' && decision !== 'deny') {
    throw new InvalidArgumentError('decision: "allow" or "deny"');
  }
  const limit = query.get('limit');
  if (limit !== null && !/^[1-9]\d{0,8}$/.test(limit)) {
    throw new InvalidArgumentError('limit: a positive integer');
  }
  return {
    ...(decision === null ? {} : { decision }),
    ...(limit === null ? {} : { limit: Number(limit) }),
  };
}

function commitMode(value: unknown): CommitMode {
  if (value === undefined) return 'detect-conflicts';
  if (value !== 'detect-conflicts' && value !== 'last-writer-wins') {
    throw new InvalidArgumentError('mode: "detect-conflicts" or "last-writer-wins"');
  }
  return value;
}

function routes(core: NodeAgentCore): Route[] {
  const id = (params: readonly string[]): string => decodeURIComponent(params[0] ?? '');
  const path = (query: URLSearchParams): string => {
    const p = query.get('path');
    if (p === null) throw new InvalidArgumentError('path: required');
    return p;
  };
  return [
    ['GET', /^\/v1\/health$/, ({ res }) => Promise.resolve(sendJson(res, 200, core.health()))],
    [
      'POST',
      /^\/v1\/sandboxes$/,
      async ({ req, res }) => {
        const body = await readJson(req);
        const quota = optionalNumber(body['diskQuotaBytes'], 'diskQuotaBytes');
        const memoryBytes = optionalNumber(body['memoryBytes'], 'memoryBytes');
        const auditAllowed = body['auditAllowed'];
        if (auditAllowed !== undefined && typeof auditAllowed !== 'boolean') {
          throw new InvalidArgumentError('auditAllowed: true or false');
        }
        const attached = await core.attach({
          sandboxId: body['sandboxId'],
          codebasePath: body['codebasePath'],
          snapshotId: body['snapshotId'],
          rules: rulesOf(body['rules']),
          ...(quota === undefined ? {} : { diskQuotaBytes: quota }),
          ...(auditAllowed === undefined ? {} : { auditAllowed }),
          ...(memoryBytes === undefined ? {} : { memoryBytes }),
        });
        sendJson(res, 201, attached);
      },
    ],
    [
      'DELETE',
      new RegExp(`^${SB}$`),
      async ({ res, params, query }) => {
        await core.detach(id(params), { dropDelta: query.get('dropDelta') === 'true' });
        sendJson(res, 200, {});
      },
    ],
    [
      'POST',
      new RegExp(`^${SB}/exec$`),
      async ({ req, res, params }) => {
        const body = await readJson(req);
        const sandbox = core.sandbox(id(params));
        const abort = new AbortController();
        res.on('close', () => abort.abort());
        const line = (value: unknown): void => void res.write(`${JSON.stringify(value)}\n`);
        const env = stringRecord(body['env'], 'env');
        const stdin = bytesField(body, 'stdin');
        const timeoutMs = optionalNumber(body['timeoutMs'], 'timeoutMs');
        const argv = stringArray(body['argv'], 'argv');
        if (body['cwd'] !== undefined && typeof body['cwd'] !== 'string')
          throw new InvalidArgumentError('cwd: a path');
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        const r = await sandbox.exec({
          argv,
          ...(typeof body['cwd'] === 'string' ? { cwd: body['cwd'] } : {}),
          ...(env === undefined ? {} : { env }),
          ...(stdin === undefined ? {} : { stdin }),
          ...(timeoutMs === undefined ? {} : { timeoutMs }),
          signal: abort.signal,
          onStdout: (c) => line({ stdout: Buffer.from(c).toString('base64') }),
          onStderr: (c) => line({ stderr: Buffer.from(c).toString('base64') }),
        });
        line({
          exit: {
            exitCode: r.exitCode,
            signal: r.signal,
            timedOut: r.timedOut,
            oomKilled: r.oomKilled,
            durationMs: r.durationMs,
          },
        });
        res.end();
      },
    ],
    ...sessionRoutes(core),
    [
      'GET',
      new RegExp(`^${SB}/files$`),
      async ({ res, params, query }) => {
        const { data } = await core.readFile(id(params), path(query));
        sendJson(res, 200, { data: Buffer.from(data).toString('base64') });
      },
    ],
    [
      'PUT',
      new RegExp(`^${SB}/files$`),
      async ({ req, res, params, query }) => {
        const data = bytesField(await readJson(req), 'data') ?? Buffer.alloc(0);
        await core.writeFile(id(params), path(query), data);
        sendJson(res, 200, {});
      },
    ],
    [
      'PUT',
      new RegExp(`^${SB}/rules$`),
      async ({ req, res, params }) => {
        await core.setRules(id(params), rulesOf((await readJson(req))['rules']));
        sendJson(res, 200, {});
      },
    ],
    [
      'GET',
      new RegExp(`^${SB}/changes$`),
      async ({ res, params }) => sendJson(res, 200, await core.changes(id(params))),
    ],
    [
      'GET',
      new RegExp(`^${SB}/audit$`),
      async ({ res, params, query }) =>
        sendJson(res, 200, { events: await core.audit(id(params), auditQuery(query)) }),
    ],
    [
      'GET',
      new RegExp(`^${SB}/diff$`),
      async ({ res, params }) => sendJson(res, 200, await core.diff(id(params))),
    ],
    [
      'POST',
      new RegExp(`^${SB}/commit$`),
      async ({ req, res, params }) => {
        const body = await readJson(req);
        const paths = body['paths'] === undefined ? undefined : stringArray(body['paths'], 'paths');
        sendJson(res, 200, await core.commit(id(params), commitMode(body['mode']), paths));
      },
    ],
    [
      'POST',
      new RegExp(`^${SB}/discard$`),
      async ({ req, res, params }) => {
        const body = await readJson(req);
        const paths = body['paths'] === undefined ? undefined : stringArray(body['paths'], 'paths');
        await core.discard(id(params), paths);
        sendJson(res, 200, {});
      },
    ],
  ];
}

/** The agent's HTTP server (not listening yet). */
export function createAgentServer(options: {
  readonly core: NodeAgentCore;
  readonly authenticated: (req: IncomingMessage) => boolean;
}): Server {
  const table = routes(options.core);
  return createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://node-agent');
    // The probes carry no token and learn nothing but a status.
    if (req.method === 'GET' && url.pathname === '/live') return sendJson(res, 200, { live: true });
    if (req.method === 'GET' && url.pathname === '/ready') {
      return sendJson(res, options.core.ready ? 200 : 503, { ready: options.core.ready });
    }
    if (!options.authenticated(req)) {
      req.resume();
      const denied = new PermissionDeniedError('missing or wrong node agent token');
      return sendJson(res, 401, { error: denied.toWire() });
    }
    for (const [method, pattern, handler] of table) {
      const match = pattern.exec(url.pathname);
      if (match === null || req.method !== method) continue;
      handler({ req, res, params: match.slice(1), query: url.searchParams }).catch((err: unknown) =>
        sendError(res, err),
      );
      return;
    }
    req.resume();
    sendError(res, new NotFoundError(`no route ${req.method ?? ''} ${url.pathname}`));
  });
}
