// Shared by the HTTP API tests: `agentfense serve` as a real process on loopback over a fresh data
// directory, a small JSON client (fetch), raw requests for URLs fetch would normalise, response checks
// against the served OpenAPI document, and leak checks (mounts, processes) for the data directory.
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import type { ResultPromise } from 'execa';
import { afterAll, beforeAll, expect, onTestFinished } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
export const bin = `${root}packages/control/bin/agentfense.js`;

export interface Served {
  readonly url: string;
  readonly dataDir: string;
  /** The bearer token it requires: its --token-file's, else the one it made in the data directory. */
  readonly token: string | undefined;
  readonly child: ResultPromise<{ reject: false; all: true }>;
  /** Everything the server printed so far. */
  output(): string;
  /** Sends `signal` and resolves with the exit status and output once the process is gone. */
  stop(signal?: 'SIGTERM' | 'SIGINT'): Promise<{ exitCode: number | undefined; output: string }>;
}

/** A scratch directory removed when the test finishes. */
export async function scratch(prefix = 'af-http-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes a token file and returns its path and the token. */
export async function tokenFile(dir: string, token = 'a'.repeat(16) + 'b'.repeat(16) + 'c'.repeat(8)) {
  const file = join(dir, 'token');
  await writeFile(file, `${token}\n`, { mode: 0o600 });
  return { file, token };
}

/**
 * Starts `agentfense serve` on an ephemeral loopback port and resolves once it listens. The caller stops
 * it with `stopAndCheck` (startServer does that when the test finishes).
 */
export async function launchServer(
  args: readonly string[],
  dataDir: string,
  options: { readonly env?: Readonly<Record<string, string>> } = {},
): Promise<Served> {
  const child = execa(
    process.execPath,
    [bin, 'serve', '--listen', '127.0.0.1:0', '--grpc-listen', '', '--data', dataDir, ...args],
    {
      reject: false,
      all: true,
      ...(options.env === undefined ? {} : { env: options.env }),
    },
  );
  let seen = '';
  child.all.on('data', (chunk: Buffer) => (seen += chunk.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (): void => {
      const match = /serving (http:\/\/\S+) /.exec(seen);
      if (match !== null) {
        child.all.off('data', onData);
        resolve(match[1] as string);
      }
    };
    child.all.on('data', onData);
    void child.then((r) => reject(new Error(`serve exited early (${r.exitCode}): ${r.all}`)));
  });
  let stopped: Promise<{ exitCode: number | undefined; output: string }> | undefined;
  // The token file it was given, else the one it made (none if it serves without: a test says so).
  const tokenAt = args.indexOf('--token-file');
  const tokenFile = tokenAt >= 0 ? (args[tokenAt + 1] as string) : join(dataDir, 'api-token');
  const token = args.includes('--insecure-no-auth')
    ? undefined
    : (await readFile(tokenFile, 'utf8').catch(() => undefined))?.trim();
  return {
    url,
    dataDir,
    token,
    child,
    output: () => seen,
    stop: (signal = 'SIGTERM') =>
      (stopped ??= (async () => {
        child.kill(signal);
        const result = await child;
        return { exitCode: result.exitCode, output: seen };
      })()),
  };
}

/** The Authorization header of `served`'s token (none for --insecure-no-auth), for raw requests. */
export function bearer(served: Served): Record<string, string> {
  return served.token === undefined ? {} : { authorization: `Bearer ${served.token}` };
}

/** Stops the server; it must exit 0 and leave no mount and no process behind in its data directory. */
export async function stopAndCheck(
  served: Served,
  signal: 'SIGTERM' | 'SIGINT' = 'SIGTERM',
): Promise<string> {
  const tree = served.child.pid === undefined ? [] : await descendantsOf(served.child.pid);
  const { exitCode, output } = await served.stop(signal);
  expect(exitCode, output).toBe(0);
  expect(await mountsUnder(served.dataDir)).toEqual([]);
  expect(await processesMentioning(served.dataDir)).toEqual([]);
  expect(await stillAlive(tree)).toEqual([]);
  return output;
}

/** launchServer over a scratch data directory, stopped and checked when the test finishes. */
export async function startServer(args: readonly string[] = []): Promise<Served> {
  const served = await launchServer(args, join(await scratch(), 'data'));
  onTestFinished(async () => {
    await stopAndCheck(served);
  });
  return served;
}

/** FUSE and bind mounts whose mountpoint is under `dir`. */
export async function mountsUnder(dir: string): Promise<string[]> {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  return text
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((mountpoint) => mountpoint.startsWith(dir));
}

/** Pids of processes whose command line mentions `text` (workers, sandboxed commands of a data dir). */
export async function processesMentioning(text: string): Promise<number[]> {
  const out: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cmdline = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(text) && !cmdline.split('\0').includes('serve')) {
      out.push(Number(name));
    }
  }
  return out;
}

/** A process as /proc shows it: pid and start time (so a reused pid is not taken for it). */
export interface ProcessRef {
  readonly pid: number;
  readonly startTime: string;
}

/** parent pid and start time from /proc/<pid>/stat (fields after the comm, which may hold spaces). */
async function statOf(pid: string): Promise<{ ppid: number; startTime: string } | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  if (stat === null) return null;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (fields[0] === 'Z') return null; // a zombie has ended
  return { ppid: Number(fields[1]), startTime: fields[19] ?? '' };
}

/**
 * Every live process below `root` (the server: its workers, bwraps and what they started). A worker
 * renames itself (process title) once it serves a sandbox, so its command line no longer shows the data
 * directory: this finds it by parentage instead.
 */
export async function descendantsOf(root: number): Promise<ProcessRef[]> {
  const parents = new Map<number, number[]>();
  const starts = new Map<number, string>();
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await statOf(name);
    if (stat === null) continue;
    starts.set(Number(name), stat.startTime);
    parents.set(stat.ppid, [...(parents.get(stat.ppid) ?? []), Number(name)]);
  }
  const found: ProcessRef[] = [];
  const queue = [...(parents.get(root) ?? [])];
  while (queue.length > 0) {
    const pid = queue.shift() as number;
    found.push({ pid, startTime: starts.get(pid) ?? '' });
    queue.push(...(parents.get(pid) ?? []));
  }
  return found;
}

/** Those of `refs` still alive (same pid and start time, not a zombie). */
export async function stillAlive(refs: readonly ProcessRef[]): Promise<ProcessRef[]> {
  const alive: ProcessRef[] = [];
  for (const ref of refs) {
    const stat = await statOf(String(ref.pid));
    if (stat !== null && stat.startTime === ref.startTime) alive.push(ref);
  }
  return alive;
}

export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  // Parsed JSON body (undefined when not JSON); tests index into it freely.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly json: any;
}

/** A JSON client: `call('POST', '/v1/codebases', { name })`. Bodies that are strings or Buffers go as they are. */
export function client(url: string, token?: string) {
  return async (
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Answer> => {
    const raw = typeof body === 'string' || body instanceof Uint8Array;
    const response = await fetch(`${url}${path}`, {
      method,
      headers: {
        ...(body === undefined || raw ? {} : { 'content-type': 'application/json' }),
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: raw ? body : JSON.stringify(body) }),
    });
    const text = await response.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, text, json };
  };
}

/**
 * A request with the path sent exactly as given (fetch would resolve `..` and encode other bytes). It
 * resolves as soon as the answer is complete, even when the server answered before reading the whole body
 * (a 413) and the rest of the upload then fails to write.
 */
export function rawRequest(
  url: string,
  method: string,
  path: string,
  body?: string | Buffer,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: { code: string; message: string } }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = httpRequest({ host: hostname, port, method, path, headers }, (res) => {
      answered = true;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as never }));
    });
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    req.end(body);
  });
}

/**
 * Sends only the request head (declaring a body of `length` bytes) and resolves with the answer: a server
 * that refuses an oversized body must do so from the head, before reading any of it.
 */
export function sendHeadOnly(
  url: string,
  path: string,
  headers: Record<string, string>,
  method = 'POST',
): Promise<{ status: number; json: { code: string; message: string } }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as never });
        req.destroy();
      });
    });
    req.on('error', reject);
    req.flushHeaders();
  });
}

/** The part of ajv's API used here (the test package does not depend on ajv itself). */
interface MiniAjv {
  compile(schema: object): ((data: unknown) => boolean) & { errors?: unknown };
  errorsText(errors: unknown): string;
}

/**
 * Checks JSON answers against the response schemas of the server's own OpenAPI document (ajv is resolved
 * from the control package, which depends on it).
 */
export async function responseChecker(url: string): Promise<(operationId: string, answer: Answer) => void> {
  const doc = (await (await fetch(`${url}/v1/openapi.json`)).json()) as {
    paths: Record<string, Record<string, { operationId: string; responses: Record<string, unknown> }>>;
  };
  const requireFromControl = createRequire(
    fileURLToPath(import.meta.resolve('@agentfense/control/package.json')),
  );
  const { Ajv } = requireFromControl('ajv') as { Ajv: new (options: object) => MiniAjv };
  // `format: int64` marks int64 fields (strings in answers); it is documentation, not checked here.
  const ajv = new Ajv({ allowUnionTypes: true, strict: true, validateFormats: false });
  const operations = new Map<string, Record<string, unknown>>();
  for (const methods of Object.values(doc.paths)) {
    for (const op of Object.values(methods)) operations.set(op.operationId, op.responses);
  }
  return (operationId, answer) => {
    const responses = operations.get(operationId);
    expect(responses, `operation ${operationId} is documented`).toBeDefined();
    const key = answer.status < 300 ? String(answer.status) : 'default';
    const schema = (responses as Record<string, { content: Record<string, { schema: object }> }>)[key]
      ?.content['application/json']?.schema;
    expect(schema, `${operationId} documents ${key} as JSON`).toBeDefined();
    const validate = ajv.compile(schema as object);
    expect(
      validate(answer.json),
      `${operationId} ${answer.status}: ${ajv.errorsText(validate.errors)}\n${answer.text}`,
    ).toBe(true);
  };
}

/** What a test file gets from useServer: the server, a JSON client for it and its schema checker. */
export interface ServerForSuite {
  readonly served: Served;
  readonly call: ReturnType<typeof client>;
  readonly check: Awaited<ReturnType<typeof responseChecker>>;
}

/**
 * One `agentfense serve` process for a whole test file, on a fresh data directory: launched before the
 * file's tests, then stopped and checked (exit 0, no mount, no process left) after them. The fields are
 * usable inside tests (after beforeAll ran).
 */
export function useServer(prefix: string): ServerForSuite {
  let dir: string | undefined;
  let parts: ServerForSuite | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), prefix));
    const served = await launchServer([], join(dir, 'data'));
    parts = { served, call: client(served.url, served.token), check: await responseChecker(served.url) };
  });
  afterAll(async () => {
    if (parts !== undefined) await stopAndCheck(parts.served);
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });
  const get = (): ServerForSuite => {
    if (parts === undefined) throw new Error('useServer: used before its beforeAll ran');
    return parts;
  };
  return {
    get served() {
      return get().served;
    },
    call: (...args) => get().call(...args),
    check: (...args) => get().check(...args),
  };
}

/** The gRPC code grpc-gateway clients see for each of our error kinds (docs: api/status.ts). */
export const GRPC_CODE: Readonly<Record<string, number>> = {
  AF_INVALID_ARGUMENT: 3,
  AF_NOT_FOUND: 5,
  AF_ALREADY_EXISTS: 6,
  AF_WRONG_STATE: 9,
  AF_CONFLICT: 10,
  AF_PERMISSION_DENIED: 7,
  AF_NO_SPACE: 8,
  AF_TIMEOUT: 4,
  AF_CANCELLED: 1,
  AF_UNAVAILABLE: 14,
  AF_PROTOCOL: 13,
  AF_WORKER_EXITED: 14,
  AF_INTERNAL: 13,
};

/**
 * An error answer as grpc-gateway writes it: `status`, google.rpc.Status `{code, message, details}` with
 * the gRPC code of `reason` (our error kind, carried as the google.rpc.ErrorInfo reason).
 */
export function expectError(
  answer: { status: number; json: unknown; text?: string },
  status: number,
  reason: string,
  message?: RegExp,
  grpcCode: number | undefined = GRPC_CODE[reason],
): void {
  const body = answer.json as { code: unknown; message: unknown; details: { reason?: unknown }[] };
  expect(answer.status, answer.text ?? JSON.stringify(answer.json)).toBe(status);
  expect(body.code, answer.text).toBe(grpcCode);
  expect(typeof body.message).toBe('string');
  expect(body.details?.[0]?.reason, answer.text).toBe(reason);
  if (message !== undefined) expect(body.message).toMatch(message);
}
