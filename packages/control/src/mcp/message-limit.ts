// The size limit of one MCP message and the JSON-RPC error that refuses a larger one, shared by stdio and
// `/mcp`. A refused request gets an answer (with its id when one can be found in what was read), so the
// client's call fails with a reason instead of waiting, and the session and its sandbox live on.
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

/** Largest MCP message accepted (bytes): the SDK's own stdio buffer size, now enforced per message. */
export const MCP_MAX_MESSAGE_BYTES = 10 * 1024 * 1024;

/** JSON-RPC "Invalid Request". */
const INVALID_REQUEST = -32600;

/** The message a refused request gets: the limit and how to send less. */
export function tooLargeMessage(limit = MCP_MAX_MESSAGE_BYTES): string {
  return (
    `AF_INVALID_ARGUMENT: request refused: an MCP message may be at most ${limit} bytes ` +
    `(${limit / (1024 * 1024)} MiB). Send less per request: split a large write_file into several ` +
    'smaller files, or produce large content inside the sandbox with run. The session and its changes ' +
    'are unchanged.'
  );
}

/** The JSON-RPC error answer to an oversized request (`id` null when it could not be read). */
export function tooLargeAnswer(id: string | number | null, limit = MCP_MAX_MESSAGE_BYTES): JSONRPCMessage {
  return {
    jsonrpc: '2.0',
    id,
    error: { code: INVALID_REQUEST, message: tooLargeMessage(limit) },
  } as unknown as JSONRPCMessage;
}

/**
 * The top-level `id` of a JSON-RPC request of which only the first and last bytes were kept: the SDK's
 * clients write it last (`{"method":…,"params":…,"jsonrpc":"2.0","id":7}`), others first.
 */
export function requestId(head: string, tail: string): string | number | null {
  const last = /"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$/.exec(tail);
  if (last !== null) return parseId(last[1] as string);
  const first = /^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")/.exec(head);
  return first === null ? null : parseId(first[1] as string);
}

function parseId(text: string): string | number | null {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === 'string' || typeof value === 'number' ? value : null;
  } catch {
    return null;
  }
}
