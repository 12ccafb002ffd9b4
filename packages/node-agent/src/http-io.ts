// JSON in and out of the agent's HTTP API, and AgentFense's error codes as HTTP statuses.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AgentFenseError, InvalidArgumentError, type ErrorCode } from '@agentfense/protocol';

/** The largest request body read (a file written through the view is the largest thing sent). */
const MAX_BODY_BYTES = 32 << 20;

const STATUS: Partial<Record<ErrorCode, number>> = {
  AF_INVALID_ARGUMENT: 400,
  AF_PERMISSION_DENIED: 403,
  AF_NOT_FOUND: 404,
  AF_ALREADY_EXISTS: 409,
  AF_WRONG_STATE: 409,
  AF_CONFLICT: 409,
  AF_NO_SPACE: 507,
  AF_TIMEOUT: 504,
  AF_UNAVAILABLE: 503,
};

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** The error as `{ error: { code, message } }` with its status; anything unexpected is AF_INTERNAL. */
export function sendError(res: ServerResponse, err: unknown): void {
  const wire =
    err instanceof AgentFenseError
      ? err.toWire()
      : { code: 'AF_INTERNAL' as const, message: err instanceof Error ? err.message : String(err) };
  if (res.headersSent) {
    // A stream already under way (exec): the error is its last line.
    res.end(`${JSON.stringify({ error: wire })}\n`);
    return;
  }
  sendJson(res, STATUS[wire.code] ?? 500, { error: wire });
}

/** The request's JSON body as an object ({} when empty). */
export async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new InvalidArgumentError(`request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  if (size === 0) return {};
  let value: unknown;
  try {
    value = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new InvalidArgumentError('request body is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError('request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

/** Base64 field → bytes (absent: undefined). */
export function bytesField(body: Record<string, unknown>, name: string): Buffer | undefined {
  const value = body[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new InvalidArgumentError(`${name}: base64 text`);
  return Buffer.from(value, 'base64');
}

export function stringArray(value: unknown, name: string): string[] {
  if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === 'string')) {
    throw new InvalidArgumentError(`${name}: a non-empty array of strings`);
  }
  return value;
}

export function stringRecord(value: unknown, name: string): Record<string, string> | undefined {
  if (value === undefined) return undefined;
  if (
    typeof value !== 'object' ||
    value === null ||
    !Object.values(value).every((v) => typeof v === 'string')
  ) {
    throw new InvalidArgumentError(`${name}: an object of strings`);
  }
  return value as Record<string, string>;
}

export function optionalNumber(value: unknown, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidArgumentError(`${name}: a non-negative integer`);
  }
  return value;
}
