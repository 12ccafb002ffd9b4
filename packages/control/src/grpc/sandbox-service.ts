// sandbox.v1.SandboxService over the shared backend (the HTTP face's): lifecycle, Exec/ExecStream and
// sessions. Where our control plane is more lenient than the original (start of a running sandbox, stop
// of a stopped one are no-ops there), this face answers as the original did: FAILED_PRECONDITION.
import { CancelledError, InvalidArgumentError, TimeoutError, WrongStateError } from '@agentfense/protocol';
import type { ExecResult as RuntimeExecResult } from '@agentfense/protocol';
import { Metadata } from '@grpc/grpc-js';
import type { ServerWritableStream } from '@grpc/grpc-js';
import type { HttpBackend as Backend } from '../http/backend.js';
import { isId } from '../ids.js';
import type { SessionExecResult } from '@agentfense/sessions';
import { SESSION_SHELLS, type SessionShell } from '@agentfense/sessions';
import {
  durationMs,
  execResultToProto,
  exitCode,
  networkAuditQuery,
  networkPolicyFromProto,
  secretFromProto,
  networkRecordToProto,
  optional,
  requestId,
  resourcesFromProto,
  rulesFromProto,
  runtimeFromProto,
  sandboxToProto,
  sessionToProto,
} from './convert.js';
import { ExecOutput_OutputType } from './gen/sandbox/v1/sandbox.js';
import type { ExecOutput, SandboxServiceServer } from './gen/sandbox/v1/sandbox.js';
import { serverStream, unary, type HandlerContext } from './handlers.js';
import { pacedCall, type PacedCall } from './paced-call.js';
import { checkpointToProto } from './checkpoint-convert.js';

/** Trailing metadata of ExecStream/SessionExecStream: the command's exit code (the stream has no field). */
export const EXIT_CODE_KEY = 'x-exit-code';
/** Largest data chunk a stream message carries. */
const STREAM_CHUNK_BYTES = 64 * 1024;
/** The original's default session shell. */
const DEFAULT_SESSION_SHELL: SessionShell = '/bin/bash';

export function sandboxService(backend: Backend, context: HandlerContext): SandboxServiceServer {
  const sandboxId = (value: string): string => requestId('sandbox', 'sandbox_id', value);
  const sessionId = (value: string): string => requestId('session', 'session_id', value);

  return {
    createSandbox: unary(context, 'CreateSandbox', async (req) => {
      const codebaseId = requestId('codebase', 'codebase_id', req.codebaseId);
      const runtime = runtimeFromProto(req.runtime);
      const resources = resourcesFromProto(req.resources);
      const expiresMs = durationMs('expires_in', req.expiresIn);
      const image = optional(req.image);
      const created = await backend.createSandbox({
        codebaseId,
        // As in the original, the rules are exactly the ones sent: none means nothing is visible.
        rules: rulesFromProto(req.permissions),
        ...(runtime === undefined ? {} : { runtime }),
        ...(image === undefined ? {} : { image }),
        ...(resources === undefined ? {} : { resources }),
        ...(Object.keys(req.labels).length === 0 ? {} : { labels: req.labels }),
        ...(expiresMs === undefined ? {} : { expiresIn: expiresMs / 1000 }),
        ...(req.networkPolicy === undefined ? {} : { network: networkPolicyFromProto(req.networkPolicy) }),
        ...(req.secrets.length === 0 ? {} : { secrets: req.secrets.map(secretFromProto) }),
      });
      return sandboxToProto(created);
    }),
    getSandbox: unary(context, 'GetSandbox', async (req) =>
      sandboxToProto(await backend.getSandbox(sandboxId(req.sandboxId))),
    ),
    listSandboxes: unary(context, 'ListSandboxes', async (req) => {
      const codebaseId = optional(req.codebaseId);
      // The original filters by plain comparison: an id that is not one of ours matches nothing.
      if (codebaseId !== undefined && !isId('codebase', codebaseId))
        return { sandboxes: [], nextPageToken: '' };
      const pageToken = optional(req.pageToken);
      const page = await backend.listSandboxes({
        ...(codebaseId === undefined ? {} : { codebaseId }),
        ...(req.pageSize === 0 ? {} : { pageSize: req.pageSize }),
        ...(pageToken === undefined ? {} : { pageToken }),
      });
      return { sandboxes: page.items.map(sandboxToProto), nextPageToken: page.nextPageToken ?? '' };
    }),
    startSandbox: unary(context, 'StartSandbox', async (req) => {
      const id = sandboxId(req.sandboxId);
      if ((await backend.getSandbox(id)).state === 'RUNNING') {
        throw new WrongStateError(`sandbox ${id} is already running`);
      }
      return sandboxToProto(await backend.startSandbox(id));
    }),
    stopSandbox: unary(context, 'StopSandbox', async (req) => {
      const id = sandboxId(req.sandboxId);
      const { state } = await backend.getSandbox(id);
      if (state !== 'RUNNING') throw new WrongStateError(`sandbox ${id} is not running (${state})`);
      return sandboxToProto(await backend.stopSandbox(id));
    }),
    destroySandbox: unary(context, 'DestroySandbox', async (req) => {
      await backend.destroySandbox(sandboxId(req.sandboxId));
      return {};
    }),
    setNetworkPolicy: unary(context, 'SetNetworkPolicy', async (req) => {
      const id = sandboxId(req.sandboxId);
      return sandboxToProto(await backend.setNetwork(id, networkPolicyFromProto(req.policy)));
    }),
    setSecret: unary(context, 'SetSecret', async (req) => {
      const id = sandboxId(req.sandboxId);
      return sandboxToProto(await backend.setSecret(id, req.name, req.value));
    }),
    getNetworkAudit: unary(context, 'GetNetworkAudit', async (req) => {
      const id = sandboxId(req.sandboxId);
      const records = await backend.networkAudit(id, networkAuditQuery(req));
      return { records: records.map(networkRecordToProto) };
    }),

    createCheckpoint: unary(context, 'CreateCheckpoint', async (req) => {
      const id = sandboxId(req.sandboxId);
      return checkpointToProto(
        await backend.checkpoint(id, {
          ...(req.name === '' ? {} : { name: req.name }),
          ...(req.message === '' ? {} : { message: req.message }),
        }),
      );
    }),
    listCheckpoints: unary(context, 'ListCheckpoints', async (req) => ({
      checkpoints: (await backend.listCheckpoints(sandboxId(req.sandboxId))).map(checkpointToProto),
    })),
    restoreCheckpoint: unary(context, 'RestoreCheckpoint', async (req) => {
      const id = sandboxId(req.sandboxId);
      const checkpoint = requestId('checkpoint', 'checkpoint_id', req.checkpointId);
      const { kept } = await backend.restoreCheckpoint(id, checkpoint, { keepCurrent: req.keepCurrent });
      return kept === undefined ? {} : { kept: checkpointToProto(kept) };
    }),
    forkSandbox: unary(context, 'ForkSandbox', async (req) => {
      const id = sandboxId(req.sandboxId);
      const resources = resourcesFromProto(req.resources);
      const checkpoint = optional(req.checkpointId);
      const forks = await backend.forkSandbox(id, {
        ...(checkpoint === undefined
          ? {}
          : { checkpointId: requestId('checkpoint', 'checkpoint_id', checkpoint) }),
        ...(req.count === 0 ? {} : { count: req.count }),
        ...(req.permissions.length === 0 ? {} : { rules: rulesFromProto(req.permissions) }),
        ...(req.preset === '' ? {} : { preset: req.preset }),
        ...(resources === undefined ? {} : { resources }),
        start: !req.noStart,
      });
      return { sandboxes: forks.map(sandboxToProto) };
    }),
    deleteCheckpoint: unary(context, 'DeleteCheckpoint', async (req) => {
      const id = sandboxId(req.sandboxId);
      await backend.deleteCheckpoint(id, requestId('checkpoint', 'checkpoint_id', req.checkpointId));
      return {};
    }),

    exec: unary(context, 'Exec', async (req, signal) => {
      const id = sandboxId(req.sandboxId);
      const timeoutMs = commandTimeout(req.command, req.timeout);
      const result = await backend.exec(id, req.command, {
        ...(req.stdin === '' ? {} : { stdin: req.stdin }),
        ...(Object.keys(req.env).length === 0 ? {} : { env: req.env }),
        ...(req.workdir === '' ? {} : { cwd: req.workdir }),
        ...(timeoutMs === undefined ? {} : { timeoutMs }),
        signal,
      });
      assertFinished(result, timeoutMs);
      return execResultToProto(result);
    }),
    // Output goes out as it arrives, with back-pressure (paced-call.ts): while the client does not read,
    // the command blocks on its output pipe; nothing is kept for a result the stream does not have.
    execStream: serverStream(context, 'ExecStream', async (req, signal, call) => {
      const id = sandboxId(req.sandboxId);
      const timeoutMs = commandTimeout(req.command, req.timeout);
      const out = pacedCall(call, { streams: context.streams, signal, stops: 'its command is stopped' });
      const sent = { stdout: 0, stderr: 0 };
      const stream =
        (type: ExecOutput_OutputType, counter: 'stdout' | 'stderr') =>
        (chunk: Buffer): Promise<void> | undefined => {
          sent[counter] += chunk.length;
          return send(out, type, chunk);
        };
      try {
        const result = await backend.exec(id, req.command, {
          ...(req.stdin === '' ? {} : { stdin: req.stdin }),
          ...(Object.keys(req.env).length === 0 ? {} : { env: req.env }),
          ...(req.workdir === '' ? {} : { cwd: req.workdir }),
          ...(timeoutMs === undefined ? {} : { timeoutMs }),
          signal: AbortSignal.any([signal, out.stalled]),
          keepOutput: false,
          onStdout: stream(ExecOutput_OutputType.OUTPUT_TYPE_STDOUT, 'stdout'),
          onStderr: stream(ExecOutput_OutputType.OUTPUT_TYPE_STDERR, 'stderr'),
        });
        if (out.stalled.aborted) throw out.stalled.reason;
        assertFinished(result, timeoutMs, { stdoutBytes: sent.stdout, stderrBytes: sent.stderr });
        endWithExitCode(call, exitCode(result.exitCode, result.signal));
      } finally {
        out.close();
      }
    }),

    createSession: unary(context, 'CreateSession', async (req) => {
      const id = sandboxId(req.sandboxId);
      const shell = req.shell === '' ? DEFAULT_SESSION_SHELL : req.shell;
      if (!(SESSION_SHELLS as readonly string[]).includes(shell)) {
        throw new InvalidArgumentError(
          `shell ${JSON.stringify(shell)} is not supported: use ${SESSION_SHELLS.join(' or ')}`,
        );
      }
      const info = await backend.createSession(id, {
        shell: shell as SessionShell,
        ...(Object.keys(req.env).length === 0 ? {} : { env: req.env }),
      });
      return sessionToProto(info);
    }),
    getSession: unary(context, 'GetSession', async (req) =>
      sessionToProto(await backend.getSession(sessionId(req.sessionId))),
    ),
    listSessions: unary(context, 'ListSessions', async (req) => ({
      sessions: (await backend.listSessions(sandboxId(req.sandboxId))).map(sessionToProto),
    })),
    destroySession: unary(context, 'DestroySession', async (req) => {
      await backend.closeSession(sessionId(req.sessionId));
      return {};
    }),
    sessionExec: unary(context, 'SessionExec', async (req) => {
      const id = sessionId(req.sessionId);
      const timeoutMs = commandTimeout(req.command, req.timeout);
      const result = await backend.sessionExec(id, req.command, timeoutMs === undefined ? {} : { timeoutMs });
      assertFinished(result, timeoutMs);
      return execResultToProto(result);
    }),
    // A session command's output arrives whole (the shell relay frames each command), so this stream
    // sends stdout, then stderr, in ≤ 64 KiB messages once the command has finished.
    sessionExecStream: serverStream(context, 'SessionExecStream', async (req, signal, call) => {
      const id = sessionId(req.sessionId);
      const timeoutMs = commandTimeout(req.command, req.timeout);
      const result = await backend.sessionExec(id, req.command, timeoutMs === undefined ? {} : { timeoutMs });
      assertFinished(result, timeoutMs);
      const out = pacedCall(call, { streams: context.streams, signal });
      try {
        for (const [type, data] of [
          [ExecOutput_OutputType.OUTPUT_TYPE_STDOUT, result.stdout],
          [ExecOutput_OutputType.OUTPUT_TYPE_STDERR, result.stderr],
        ] as const) {
          await send(out, type, data);
          if (out.stalled.aborted) throw out.stalled.reason;
        }
        endWithExitCode(call, exitCode(result.exitCode, null));
      } finally {
        out.close();
      }
    }),
  };
}

/** Checks the command and returns the timeout in milliseconds (undefined: none). */
function commandTimeout(command: string, timeout: Parameters<typeof durationMs>[1]): number | undefined {
  if (command === '') throw new InvalidArgumentError('command is required');
  return durationMs('timeout', timeout);
}

/**
 * A command that ran out of time or was cancelled ends the call with that status, as in the original;
 * `sent` counts what a stream sent (it keeps no output in the result).
 */
function assertFinished(
  result: RuntimeExecResult | SessionExecResult,
  timeoutMs: number | undefined,
  sent: { stdoutBytes: number; stderrBytes: number } = {
    stdoutBytes: result.stdout.length,
    stderrBytes: result.stderr.length,
  },
): void {
  if (result.timedOut) {
    throw new TimeoutError(`command timed out after ${(timeoutMs ?? 0) / 1000}s`, { details: sent });
  }
  if ('cancelled' in result && result.cancelled) throw new CancelledError('command cancelled');
}

/** Sends `data` in messages of at most 64 KiB; a returned promise: wait for it before sending more. */
function send(
  out: PacedCall<ExecOutput>,
  type: ExecOutput_OutputType,
  data: Buffer,
): Promise<void> | undefined {
  let wait: Promise<void> | undefined;
  for (let at = 0; at < data.length; at += STREAM_CHUNK_BYTES) {
    const piece = data.subarray(at, at + STREAM_CHUNK_BYTES);
    wait = out.send({ type, data: piece }, piece.length) ?? wait;
  }
  return wait;
}

function endWithExitCode(call: ServerWritableStream<unknown, ExecOutput>, code: number): void {
  const trailers = new Metadata();
  trailers.set(EXIT_CODE_KEY, String(code));
  call.end(trailers);
}
