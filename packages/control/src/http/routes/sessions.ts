// Session routes (persistent shells in a running sandbox): create and list under a sandbox, then get,
// exec and destroy by session id, as the original's REST gateway had them.
import type { FastifyInstance } from 'fastify';
import type { SessionShell } from '@agentfense/sessions';
import type { HttpBackend } from '../backend.js';
import { defineRoute } from '../define.js';
import { timedOut } from './exec.js';
import { parseDuration, sessionExecResultToWire, sessionToWire, pathId } from '../mapping.js';
import type { OutputEncoding, WireDuration } from '../mapping.js';
import {
  CreateSessionBody,
  Empty,
  IdParams,
  SessionExecBody,
  SessionExecResultSchema,
  SessionList,
  SessionSchema,
} from '../schemas.js';

const tags = ['sessions'];

interface IdParam {
  id: string;
}

export function registerSessionRoutes(app: FastifyInstance, backend: HttpBackend): void {
  defineRoute<
    { shell?: string; env?: Record<string, string>; workdir?: string; idle_timeout?: WireDuration },
    unknown,
    IdParam
  >(app, {
    method: 'POST',
    url: '/v1/sandboxes/:id/sessions',
    operationId: 'CreateSession',
    summary: 'Start a persistent shell in a running sandbox (cwd and environment persist between commands)',
    tags,
    params: IdParams('sandbox', 'sb'),
    body: CreateSessionBody,
    optionalBody: true,
    response: SessionSchema,
    handler: async (req) => {
      const b = req.body;
      const info = await backend.createSession(pathId('sandbox', req.params.id), {
        // The shell is checked against the allowed list by the session layer (400 with the list).
        ...(b.shell === undefined ? {} : { shell: b.shell as SessionShell }),
        ...(b.env === undefined ? {} : { env: b.env }),
        ...(b.workdir === undefined ? {} : { cwd: b.workdir }),
        ...(b.idle_timeout === undefined
          ? {}
          : { idleTimeoutMs: Math.ceil(parseDuration('idle_timeout', b.idle_timeout) * 1000) }),
      });
      return sessionToWire(info);
    },
  });

  defineRoute<unknown, unknown, IdParam>(app, {
    method: 'GET',
    url: '/v1/sandboxes/:id/sessions',
    operationId: 'ListSessions',
    summary: 'The open sessions of a sandbox',
    tags,
    params: IdParams('sandbox', 'sb'),
    response: SessionList,
    handler: async (req) => ({
      sessions: (await backend.listSessions(pathId('sandbox', req.params.id))).map((s) => sessionToWire(s)),
    }),
  });

  defineRoute<unknown, unknown, IdParam>(app, {
    method: 'GET',
    url: '/v1/sessions/:id',
    operationId: 'GetSession',
    summary: 'Get an open session (closed sessions are gone: 404)',
    tags,
    params: IdParams('session', 'ses'),
    response: SessionSchema,
    handler: async (req) => sessionToWire(await backend.getSession(pathId('session', req.params.id))),
  });

  defineRoute<unknown, unknown, IdParam>(app, {
    method: 'DELETE',
    url: '/v1/sessions/:id',
    operationId: 'DestroySession',
    summary: 'Close a session and kill everything it started',
    tags,
    params: IdParams('session', 'ses'),
    response: Empty,
    handler: async (req) => {
      await backend.closeSession(pathId('session', req.params.id));
      return {};
    },
  });

  defineRoute<
    { command: string; stdin?: string; timeout?: WireDuration; output_encoding?: OutputEncoding },
    unknown,
    IdParam
  >(app, {
    method: 'POST',
    url: '/v1/sessions/:id/exec',
    operationId: 'SessionExec',
    summary:
      'Run a command in the session (after any queued before it); a timeout interrupts it (504 DEADLINE_EXCEEDED, output so far in the error details), the session stays',
    tags,
    params: IdParams('session', 'ses'),
    body: SessionExecBody,
    response: SessionExecResultSchema,
    handler: async (req) => {
      const id = pathId('session', req.params.id);
      const b = req.body;
      const result = await backend.sessionExec(id, b.command, {
        ...(b.stdin === undefined ? {} : { stdin: b.stdin }),
        ...(b.timeout === undefined
          ? {}
          : { timeoutMs: Math.ceil(parseDuration('timeout', b.timeout) * 1000) }),
      });
      const wire = sessionExecResultToWire(result, b.output_encoding ?? 'utf8');
      if (result.timedOut) throw timedOut(wire);
      return wire;
    },
  });
}
