// Tool results as MCP carries them: text a model reads, plus the same facts as structured content for
// programs. Failures are tool results with isError (never JSON-RPC errors), so the model sees them and can
// act: each carries the project's stable error code and a message that says what to do instead.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { AgentFenseError, InternalError, NoSpaceError } from '@agentfense/protocol';
import type { ErrorCode } from '@agentfense/protocol';
import { noSpaceMessage } from '../disk/no-space.js';

/** A successful result: `text` for the model, `data` as structuredContent. */
export function ok(text: string, data?: Record<string, unknown>): CallToolResult {
  return {
    content: [{ type: 'text', text }],
    ...(data === undefined ? {} : { structuredContent: data }),
  };
}

/** A failed result with an error code (and optional structured facts, e.g. a timed-out command's output). */
export function failure(
  code: ErrorCode,
  message: string,
  data?: Record<string, unknown>,
  extraText = '',
): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: `error ${code}: ${message}${extraText === '' ? '' : `\n${extraText}`}` }],
    structuredContent: { error: { code, message }, ...data },
  };
}

/**
 * Any thrown value as a tool error. AgentFense errors keep their code and message (they are written for
 * users already); anything else is an internal error whose details go to the log, not to the model.
 */
export function errorResult(err: unknown, log?: (err: unknown) => void): CallToolResult {
  if (err instanceof NoSpaceError && typeof err.details?.['directory'] === 'string') {
    // The same facts without the data directory's host path, which no MCP answer carries.
    const facts = { operation: String(err.details['operation']), reason: String(err.details['reason']) };
    return failure(err.code, noSpaceMessage(facts), { details: facts });
  }
  if (err instanceof AgentFenseError) {
    return failure(err.code, err.message, err.details === undefined ? undefined : { details: err.details });
  }
  log?.(err);
  const internal = new InternalError('internal error in the agentfense MCP server (see its log)');
  return failure(internal.code, internal.message);
}
