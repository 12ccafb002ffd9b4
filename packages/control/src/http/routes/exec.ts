// Exec routes: one command with its whole output, or streamed as NDJSON while it runs. A command is
// cancelled when its client goes away or the server shuts down.
import { PassThrough } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ExecResult } from '@agentfense/protocol';
import { TimeoutError, WrongStateError, toAgentFenseError } from '@agentfense/protocol';
import { stallError, stallGraceMs } from '../../api/stream-budget.js';
import type { SandboxExecOptions } from '../../sandboxes/types.js';
import type { HttpBackend } from '../backend.js';
import { defineRoute } from '../define.js';
import { toHttpError } from '../errors.js';
import { camelKeys } from '../protojson.js';
import { execResultToWire, formatDuration, parseDuration, pathId } from '../mapping.js';
import type { OutputEncoding, WireDuration } from '../mapping.js';
import { ExecBody, ExecResultSchema, ExecStreamChunk, IdParams } from '../schemas.js';
import type { SandboxRouteContext } from './sandboxes.js';

const tags = ['sandboxes'];
const params = IdParams('sandbox', 'sb');

interface IdParam {
  id: string;
}

interface ExecBodyIn {
  command: string | string[];
  stdin?: string;
  env?: Record<string, string>;
  workdir?: string;
  timeout?: WireDuration;
  output_encoding?: OutputEncoding;
}

/** Registers Exec and ExecStream. */
export function registerExecRoutes(
  app: FastifyInstance,
  backend: HttpBackend,
  context: SandboxRouteContext,
): void {
  defineRoute<ExecBodyIn, unknown, IdParam>(app, {
    method: 'POST',
    url: '/v1/sandboxes/:id/exec',
    operationId: 'Exec',
    summary: 'Run one command in a running sandbox and return its output',
    description:
      'A command still running when the client disconnects is killed. `timeout` kills the whole process tree and the answer is 504 DEADLINE_EXCEEDED (code 4), as the original answers; the output so far is in the ErrorInfo metadata (`stdout`, `stderr`).',
    tags,
    params,
    body: ExecBody,
    response: ExecResultSchema,
    handler: async (req, reply) => {
      const id = pathId('sandbox', req.params.id);
      const { options, abort } = execOptions(req.body, reply, context.shutdown);
      try {
        const result = await backend.exec(id, req.body.command, options);
        const wire = execResultToWire(result, req.body.output_encoding ?? 'utf8');
        if (result.timedOut) throw timedOut(wire);
        return wire;
      } finally {
        abort.dispose();
      }
    },
  });

  defineRoute<ExecBodyIn, unknown, IdParam>(app, {
    method: 'POST',
    url: '/v1/sandboxes/:id/exec/stream',
    operationId: 'ExecStream',
    summary: 'Run one command and stream its output as newline-delimited JSON',
    description:
      'Content type application/x-ndjson. Each line is one JSON object: `{"stream":"stdout"|"stderr","data":"..."}` as output arrives (data in `output_encoding`, default base64 here, so bytes are exact), then one final line: `{"done":true,"exit_code":0,"duration":"0.01s",...}` (an ExecResult without stdout/stderr) or `{"done":true,"error":{"code","message"}}`. Errors found before the command starts (unknown sandbox, not running, bad input) are ordinary `{code, message}` responses with their status.',
    tags,
    params,
    body: ExecBody,
    response: ExecStreamChunk,
    doc: { responseContentType: 'application/x-ndjson' },
    handler: async (req, reply) => {
      const id = pathId('sandbox', req.params.id);
      const sandbox = await backend.getSandbox(id);
      if (sandbox.state !== 'RUNNING') {
        throw new WrongStateError(`sandbox ${id} is ${sandbox.state}, not RUNNING`, { details: { id } });
      }
      const encoding = req.body.output_encoding ?? 'base64';
      const out = new PassThrough();
      // Output lines go out with back-pressure (paced-body.ts): while the client does not read, the
      // command blocks on its pipe. One that reads nothing for the stall time gets an error line, and its
      // connection is closed after a grace if that line is still not read.
      const stalled = new AbortController();
      const grace = stallGraceMs(context.streams.limits);
      const paced = context.streams.open({
        onStall: (stall) => {
          stalled.abort(stallError(stall, 'its command is stopped'));
          setTimeout(() => reply.raw.writableFinished || reply.raw.destroy(), grace).unref();
        },
      });
      const write = (line: Record<string, unknown>): Promise<void> | undefined => {
        const text = `${JSON.stringify(line)}\n`;
        return paced.write(Buffer.byteLength(text), (taken) => void out.write(text, () => taken()));
      };
      const last = (line: Record<string, unknown>): void => void out.write(`${JSON.stringify(line)}\n`);
      const chunker = (stream: 'stdout' | 'stderr'): ((chunk: Buffer) => Promise<void> | undefined) => {
        if (encoding === 'base64') return (chunk) => write({ stream, data: chunk.toString('base64') });
        const decoder = new StringDecoder('utf8'); // never splits a character across lines
        return (chunk) => {
          const data = decoder.write(chunk);
          return data === '' ? undefined : write({ stream, data });
        };
      };
      const { options, abort } = execOptions(req.body, reply, context.shutdown, {
        onStdout: chunker('stdout'),
        onStderr: chunker('stderr'),
      });
      // Through a promise chain, so even a synchronous throw ends the stream with an error line.
      void Promise.resolve()
        .then(() =>
          backend.exec(id, req.body.command, {
            ...options,
            signal: AbortSignal.any([options.signal as AbortSignal, stalled.signal]),
            keepOutput: false,
          }),
        )
        .then((result) => {
          if (stalled.signal.aborted) throw stalled.signal.reason;
          last(
            result.timedOut
              ? { done: true, error: toHttpError(timedOut(finalLine(result))).body }
              : { done: true, ...camelKeys(finalLine(result)) },
          );
        })
        .catch((err: unknown) => last({ done: true, error: toHttpError(toAgentFenseError(err)).body }))
        .finally(() => {
          paced.close();
          abort.dispose();
          out.end();
        });
      return reply.type('application/x-ndjson').send(out);
    },
  });
}

/**
 * The error for a command that ran out of time: DEADLINE_EXCEEDED, as the original answers, with what
 * the result said (output so far, duration) in its details so nothing is lost.
 */
export function timedOut(wire: Record<string, unknown>): TimeoutError {
  return new TimeoutError('command timed out', { details: camelKeys(wire) });
}

/** The final NDJSON line: the result without its output (already streamed). */
function finalLine(result: ExecResult): Record<string, unknown> {
  const { stdout: _stdout, stderr: _stderr, encoding: _encoding, ...rest } = execResultToWire(result, 'utf8');
  return { ...rest, duration: formatDuration(result.durationMs) };
}

/**
 * Exec options from a request, with a signal that fires when the client goes away before the answer is
 * complete or when the server shuts down. `abort.dispose()` stops watching once the command is over.
 */
function execOptions(
  body: ExecBodyIn,
  reply: FastifyReply,
  shutdown: AbortSignal,
  streaming: Pick<SandboxExecOptions, 'onStdout' | 'onStderr'> = {},
): { options: SandboxExecOptions; abort: { dispose(): void } } {
  const timeoutMs =
    body.timeout === undefined ? undefined : Math.ceil(parseDuration('timeout', body.timeout) * 1000);
  const controller = new AbortController();
  if (shutdown.aborted) controller.abort();
  const onClose = (): void => {
    if (!reply.raw.writableFinished) controller.abort();
  };
  const onShutdown = (): void => controller.abort();
  reply.raw.on('close', onClose);
  shutdown.addEventListener('abort', onShutdown, { once: true });
  const options: SandboxExecOptions = {
    ...(body.stdin === undefined ? {} : { stdin: body.stdin }),
    ...(body.env === undefined ? {} : { env: body.env }),
    ...(body.workdir === undefined ? {} : { cwd: body.workdir }),
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    signal: controller.signal,
    ...streaming,
  };
  return {
    options,
    abort: {
      dispose: () => {
        reply.raw.off('close', onClose);
        shutdown.removeEventListener('abort', onShutdown);
      },
    },
  };
}
