// Sandbox routes: lifecycle (exec is exec.ts), the delta (changes, diff, commit, discard), logs
// and audit. Bodies arrive validated by the schemas; conversion to the control plane's shapes is mapping.ts.
import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { NetworkPolicyInput, SecretInput } from '@agentfense/network';
import { WrongStateError, toAgentFenseError } from '@agentfense/protocol';
import { stallError, type StreamBudget } from '../../api/stream-budget.js';
import { followLog, tailLog } from '../../sandboxes/log-file.js';
import type { HttpBackend, HttpCreateSandboxOptions } from '../backend.js';
import { defineRoute } from '../define.js';
import { registerExecRoutes } from './exec.js';
import { registerCheckpointRoutes } from './checkpoints.js';
import { registerNetworkRoutes } from './network.js';
import {
  COMMIT_MODE,
  RUNTIME_TYPE,
  SANDBOX_STATUS,
  auditToWire,
  changeToWire,
  commitToWire,
  labelsFromQuery,
  parseDuration,
  resourcesFromWire,
  rulesFromWire,
  sandboxToWire,
  pathId,
} from '../mapping.js';
import type { WireDuration, WireResources, WireRuleIn } from '../mapping.js';
import {
  AuditQuery,
  AuditResult,
  ChangeList,
  CommitBody,
  CommitResultSchema,
  CreateSandboxBody,
  DiffQuery,
  DiffResult,
  DiscardBody,
  Empty,
  IdParams,
  ListSandboxesQuery,
  LogStreamLine,
  LogsQuery,
  LogsResult,
  Sandbox,
  SandboxList,
} from '../schemas.js';

const tags = ['sandboxes'];
const params = IdParams('sandbox', 'sb');

interface IdParam {
  id: string;
}

interface CreateBody {
  codebase_id: string;
  permissions?: WireRuleIn[];
  preset?: string;
  runtime?: string;
  image?: string;
  resources?: WireResources;
  labels?: Record<string, string>;
  expires_in?: WireDuration;
  network?: boolean;
  network_policy?: NetworkPolicyInput;
  secrets?: SecretInput[];
  env?: Record<string, string>;
  audit_allowed?: boolean;
  start?: boolean;
}

/** What routes need besides the backend: the signal that aborts every running command at shutdown. */
export interface SandboxRouteContext {
  readonly shutdown: AbortSignal;
  /** Back-pressure of the streaming routes (api/stream-budget.ts). */
  readonly streams: StreamBudget;
}

export function registerSandboxRoutes(
  app: FastifyInstance,
  backend: HttpBackend,
  context: SandboxRouteContext,
): void {
  defineRoute<CreateBody>(app, {
    method: 'POST',
    url: '/v1/sandboxes',
    operationId: 'CreateSandbox',
    summary: 'Create a sandbox over a codebase (PENDING; `start: true` starts it too)',
    tags,
    body: CreateSandboxBody,
    response: Sandbox,
    handler: async (req) => {
      const b = req.body;
      const runtime = b.runtime === undefined ? undefined : RUNTIME_TYPE.parse(b.runtime);
      const options: HttpCreateSandboxOptions = {
        codebaseId: b.codebase_id,
        ...(b.permissions === undefined ? {} : { rules: rulesFromWire(b.permissions) }),
        ...(b.preset === undefined ? {} : { preset: b.preset }),
        ...(runtime === undefined ? {} : { runtime }),
        ...(b.image === undefined ? {} : { image: b.image }),
        ...(b.resources === undefined ? {} : { resources: resourcesFromWire(b.resources) }),
        ...(b.labels === undefined ? {} : { labels: b.labels }),
        ...(b.expires_in === undefined ? {} : { expiresIn: parseDuration('expires_in', b.expires_in) }),
        ...(b.network === undefined ? {} : { network: b.network }),
        // Our own field wins over the original's flag when both are given.
        ...(b.network_policy === undefined ? {} : { network: b.network_policy }),
        // Values only: an API caller never names a file or command for the control plane to read.
        ...(b.secrets === undefined ? {} : { secrets: b.secrets }),
        ...(b.env === undefined ? {} : { env: b.env }),
        ...(b.audit_allowed === undefined ? {} : { auditAllowed: b.audit_allowed }),
      };
      const created = await backend.createSandbox(options);
      if (b.start !== true) return sandboxToWire(created);
      try {
        return sandboxToWire(await backend.startSandbox(created.id));
      } catch (err) {
        // Created but not started: say so, and do not leave an orphan behind for the caller to find.
        await backend.destroySandbox(created.id).catch(() => undefined);
        throw err;
      }
    },
  });

  defineRoute<
    unknown,
    { codebase_id?: string; status?: string; labels?: string[]; page_size?: number; page_token?: string }
  >(app, {
    method: 'GET',
    url: '/v1/sandboxes',
    operationId: 'ListSandboxes',
    summary: 'List sandboxes, filtered by codebase, status and labels, one page at a time',
    tags,
    querystring: ListSandboxesQuery,
    response: SandboxList,
    handler: async (req) => {
      const q = req.query;
      const labels = labelsFromQuery(q.labels ?? []);
      const state = q.status === undefined ? undefined : SANDBOX_STATUS.parse(q.status);
      const page = await backend.listSandboxes({
        ...(q.codebase_id === undefined || q.codebase_id === '' ? {} : { codebaseId: q.codebase_id }),
        ...(state === undefined ? {} : { state }),
        ...(labels === undefined ? {} : { labels }),
        ...(q.page_size === undefined ? {} : { pageSize: q.page_size }),
        ...(q.page_token === undefined || q.page_token === '' ? {} : { pageToken: q.page_token }),
      });
      return { sandboxes: page.items.map(sandboxToWire), next_page_token: page.nextPageToken ?? '' };
    },
  });

  defineRoute<unknown, unknown, IdParam>(app, {
    method: 'GET',
    url: '/v1/sandboxes/:id',
    operationId: 'GetSandbox',
    summary: 'Get a sandbox',
    tags,
    params,
    response: Sandbox,
    handler: async (req) => sandboxToWire(await backend.getSandbox(pathId('sandbox', req.params.id))),
  });

  defineRoute<unknown, unknown, IdParam>(app, {
    method: 'POST',
    url: '/v1/sandboxes/:id/start',
    operationId: 'StartSandbox',
    summary: 'Start a sandbox: worker, mount, runtime (returns it RUNNING, or the error)',
    tags,
    params,
    response: Sandbox,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      // The original refuses a repeated start (FAILED_PRECONDITION) rather than answering it again.
      if ((await backend.getSandbox(id)).state === 'RUNNING') {
        throw new WrongStateError(`sandbox ${id} is already running`, { details: { id } });
      }
      return sandboxToWire(await backend.startSandbox(id));
    },
  });

  defineRoute<unknown, unknown, IdParam>(app, {
    method: 'POST',
    url: '/v1/sandboxes/:id/stop',
    operationId: 'StopSandbox',
    summary: 'Stop a sandbox (its sessions close, its changes stay)',
    tags,
    params,
    response: Sandbox,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      const state = (await backend.getSandbox(id)).state;
      if (state !== 'RUNNING') {
        throw new WrongStateError(`sandbox ${id} is not running (it is ${state})`, {
          details: { id, state },
        });
      }
      return sandboxToWire(await backend.stopSandbox(id));
    },
  });

  defineRoute<unknown, unknown, IdParam>(app, {
    method: 'DELETE',
    url: '/v1/sandboxes/:id',
    operationId: 'DestroySandbox',
    summary: 'Destroy a sandbox in any state, with its changes',
    tags,
    params,
    response: Empty,
    handler: async (req) => {
      await backend.destroySandbox(pathId('sandbox', req.params.id));
      return {};
    },
  });

  registerExecRoutes(app, backend, context);
  registerNetworkRoutes(app, backend);
  registerCheckpointRoutes(app, backend);

  defineRoute<unknown, unknown, IdParam>(app, {
    method: 'GET',
    url: '/v1/sandboxes/:id/changes',
    operationId: 'ListChanges',
    summary: "The sandbox's change set (added, modified, deleted paths)",
    tags,
    params,
    response: ChangeList,
    handler: async (req) => ({
      changes: (await backend.changes(pathId('sandbox', req.params.id))).map(changeToWire),
    }),
  });

  defineRoute<unknown, { paths?: string[] }, IdParam>(app, {
    method: 'GET',
    url: '/v1/sandboxes/:id/diff',
    operationId: 'Diff',
    summary: 'Unified diff of the sandbox against its codebase',
    tags,
    params,
    querystring: DiffQuery,
    response: DiffResult,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      const result = await backend.diff(id, req.query.paths === undefined ? {} : { paths: req.query.paths });
      return { diff: result.diff, binary: [...result.binary] };
    },
  });

  defineRoute<{ mode?: string; paths?: string[] }, unknown, IdParam>(app, {
    method: 'POST',
    url: '/v1/sandboxes/:id/commit',
    operationId: 'Commit',
    summary: 'Apply the changes to the codebase (conflicts are reported and kept back)',
    tags,
    params,
    body: CommitBody,
    optionalBody: true,
    response: CommitResultSchema,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      const body = req.body;
      const result = await backend.commit(id, {
        ...(body.mode === undefined ? {} : { mode: COMMIT_MODE.parse(body.mode) }),
        ...(body.paths === undefined ? {} : { paths: body.paths }),
      });
      return commitToWire(result);
    },
  });

  defineRoute<{ paths?: string[] }, unknown, IdParam>(app, {
    method: 'POST',
    url: '/v1/sandboxes/:id/discard',
    operationId: 'Discard',
    summary: 'Throw the changes away (all, or only `paths`)',
    tags,
    params,
    body: DiscardBody,
    optionalBody: true,
    response: Empty,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      const paths = req.body.paths;
      await backend.discard(id, paths === undefined ? {} : { paths });
      return {};
    },
  });

  defineRoute<unknown, { tail?: number }, IdParam>(app, {
    method: 'GET',
    url: '/v1/sandboxes/:id/logs',
    operationId: 'Logs',
    summary: "The sandbox's own log (its worker's JSON lines), last lines first cut",
    tags,
    params,
    querystring: LogsQuery,
    response: LogsResult,
    handler: async (req) => ({
      lines: await backend.logs(pathId('sandbox', req.params.id), { tail: req.query.tail ?? 1000 }),
    }),
  });

  defineRoute<unknown, { tail?: number }, IdParam>(app, {
    method: 'GET',
    url: '/v1/sandboxes/:id/logs/stream',
    operationId: 'LogsStream',
    summary: "Follow the sandbox's own log as newline-delimited JSON (like tail -f)",
    description:
      'Content type application/x-ndjson. First the last `tail` lines (default 1000), then each new line as the worker writes it, each as `{"line": "..."}`. Ends with `{"done": true, "reason": "..."}` when the sandbox is destroyed or the server shuts down; otherwise runs until the client disconnects. An unknown sandbox is an ordinary 404.',
    tags,
    params,
    querystring: LogsQuery,
    response: LogStreamLine,
    doc: { responseContentType: 'application/x-ndjson' },
    handler: async (req, reply) => {
      const id = pathId('sandbox', req.params.id);
      const controller = new AbortController();
      const stop = (): void => controller.abort();
      // Watched before any await: a client that leaves while the tail is read must not leave a poller.
      reply.raw.once('close', stop);
      context.shutdown.addEventListener('abort', stop, { once: true });
      if (context.shutdown.aborted) stop();
      const release = (): void => {
        reply.raw.off('close', stop);
        context.shutdown.removeEventListener('abort', stop);
      };
      let file: string;
      let first: Awaited<ReturnType<typeof tailLog>>;
      try {
        file = await backend.logFile(id);
        first = await tailLog(file, req.query.tail ?? 1000);
      } catch (err) {
        release();
        throw err;
      }
      const out = new PassThrough();
      out.once('close', stop);
      // Back-pressure (api/stream-budget.ts): a client that reads slowly holds the poll back instead of
      // growing our memory; one that reads nothing for the stall time has its stream ended.
      let reason: string | undefined;
      const paced = context.streams.open({
        onStall: (stall) => {
          reason = stallError(stall).message;
          stop();
        },
      });
      controller.signal.addEventListener('abort', () => paced.close(), { once: true });
      const send = async (lines: readonly string[]): Promise<void> => {
        for (const line of lines) {
          const text = `${JSON.stringify({ line })}\n`;
          await paced.write(Buffer.byteLength(text), (taken) => void out.write(text, () => taken()));
          if (controller.signal.aborted) return;
        }
      };
      const gone = async (): Promise<boolean> => {
        try {
          await backend.getSandbox(id);
          return false;
        } catch {
          reason = 'sandbox destroyed';
          return true;
        }
      };
      void send(first.lines)
        .then(() =>
          followLog(file, { offset: first.offset, signal: controller.signal, onLines: send, done: gone }),
        )
        .catch((err: unknown) => (reason = `reading the log failed: ${toAgentFenseError(err).message}`))
        .finally(() => {
          release();
          paced.close();
          if (reason === undefined && context.shutdown.aborted) reason = 'server shutting down';
          if (reason !== undefined) out.write(`${JSON.stringify({ done: true, reason })}\n`);
          out.end();
        });
      return reply.type('application/x-ndjson').send(out);
    },
  });

  defineRoute<unknown, { decision?: 'allow' | 'deny'; limit?: number }, IdParam>(app, {
    method: 'GET',
    url: '/v1/sandboxes/:id/audit',
    operationId: 'Audit',
    summary: 'Audit events of the sandbox (denials always; allowed accesses when it audits them)',
    tags,
    params,
    querystring: AuditQuery,
    response: AuditResult,
    handler: async (req) => {
      const id = pathId('sandbox', req.params.id);
      const events = await backend.audit(id, {
        ...(req.query.decision === undefined ? {} : { decision: req.query.decision }),
        ...(req.query.limit === undefined ? {} : { limit: req.query.limit }),
      });
      return { events: events.map(auditToWire) };
    },
  });
}
