// The API tier's client of one node agent (packages/node-agent): JSON over HTTP with the bearer token,
// exec answered as NDJSON. The node agent's errors come back as AgentFense's own (its `{error: {code,
// message}}`); a node agent that cannot be reached is `node-agent-unreachable`. The token goes in the
// Authorization header only: no message, log line or error built here contains it.
import {
  AgentFenseError,
  InternalError,
  ProtocolError,
  fromWire,
  type AuditEvent,
  type ChangeEntry,
  type CommitMode,
  type CommitResult,
  type PermissionRule,
} from '@agentfense/protocol';
import type { SessionExecResult, SessionInfo, SessionShell } from '@agentfense/sessions';
import type { AuditQuery } from '@agentfense/audit-trail';
import { RemoteSandboxError } from './errors.js';

/** A node agent's address and the API tier's token for it. */
export interface NodeAgentEndpoint {
  readonly host: string;
  readonly port: number;
  readonly token: string;
  /**
   * The id the node knows a sandbox by: its placement's (a warm placement claimed for it keeps the id it
   * was placed under, which its container's label carries). Default: the sandbox's own id.
   */
  readonly placementOf?: (sandboxId: string) => string;
}

/** One command's request, as the node agent takes it. */
export interface RemoteExecRequest {
  readonly argv: readonly string[];
  readonly cwd?: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly stdin?: Uint8Array;
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
  readonly onStdout?: (chunk: Buffer) => unknown;
  readonly onStderr?: (chunk: Buffer) => unknown;
}

export interface RemoteExecExit {
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly timedOut: boolean;
  readonly oomKilled: boolean;
  readonly durationMs: number;
}

/** A session as the node agent opens it. */
export interface RemoteSessionRequest {
  readonly id: string;
  readonly shell?: SessionShell;
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
  readonly idleTimeoutMs?: number;
}

/** How long a call other than exec waits for the node agent's answer. */
const CALL_TIMEOUT_MS = 60_000;

export class NodeAgentClient {
  readonly #base: string;
  readonly #token: string;
  /** `host:port`, for messages. */
  readonly address: string;

  constructor(endpoint: NodeAgentEndpoint) {
    const host = endpoint.host.includes(':') ? `[${endpoint.host}]` : endpoint.host;
    this.address = `${host}:${endpoint.port}`;
    this.#base = `http://${this.address}`;
    this.#token = endpoint.token;
    this.#placementOf = endpoint.placementOf ?? ((id) => id);
  }

  readonly #placementOf: (sandboxId: string) => string;

  #sandboxPath(sandboxId: string): string {
    return sandboxPath(this.#placementOf(sandboxId));
  }

  #sessionPath(sandboxId: string, sessionId: string): string {
    return sessionPath(this.#placementOf(sandboxId), sessionId);
  }

  attach(request: {
    readonly sandboxId: string;
    /** Exactly one: the codebase's path as the node sees it, or a snapshot in the node's blob store. */
    readonly codebasePath?: string;
    readonly snapshotId?: string;
    readonly rules: readonly PermissionRule[];
    readonly diskQuotaBytes?: number;
    readonly auditAllowed?: boolean;
    readonly memoryBytes?: number;
  }): Promise<{ sandboxId: string; container: string }> {
    return this.#json('POST', '/v1/sandboxes', {
      ...request,
      sandboxId: this.#placementOf(request.sandboxId),
    });
  }

  async detach(sandboxId: string, options: { readonly dropDelta?: boolean } = {}): Promise<void> {
    const query = options.dropDelta === true ? '?dropDelta=true' : '';
    await this.#json('DELETE', `${this.#sandboxPath(sandboxId)}${query}`);
  }

  /** The node's attached sandboxes and whether each one's container is still connected. */
  health(): Promise<{ readonly sandboxes: readonly { id: string; alive: boolean }[] }> {
    return this.#json('GET', '/v1/health');
  }

  async readFile(sandboxId: string, path: string): Promise<Buffer> {
    const r = await this.#json<{ data: string }>(
      'GET',
      `${this.#sandboxPath(sandboxId)}/files?${pathQuery(path)}`,
    );
    return Buffer.from(r.data, 'base64');
  }

  async writeFile(sandboxId: string, path: string, data: Uint8Array): Promise<void> {
    await this.#json('PUT', `${this.#sandboxPath(sandboxId)}/files?${pathQuery(path)}`, {
      data: Buffer.from(data).toString('base64'),
    });
  }

  async changes(sandboxId: string): Promise<readonly ChangeEntry[]> {
    return (await this.#json<{ changes: ChangeEntry[] }>('GET', `${this.#sandboxPath(sandboxId)}/changes`))
      .changes;
  }

  diff(sandboxId: string): Promise<{ diff: string; binary: readonly string[] }> {
    return this.#json('GET', `${this.#sandboxPath(sandboxId)}/diff`);
  }

  commit(
    sandboxId: string,
    options: { readonly mode?: CommitMode; readonly paths?: readonly string[] },
  ): Promise<CommitResult> {
    return this.#json('POST', `${this.#sandboxPath(sandboxId)}/commit`, options);
  }

  /** The audit trail the node keeps for the sandbox (its worker's decisions), newest last. */
  async audit(sandboxId: string, query: AuditQuery): Promise<AuditEvent[]> {
    const params = new URLSearchParams();
    if (query.decision !== undefined) params.set('decision', query.decision);
    if (query.limit !== undefined) params.set('limit', String(query.limit));
    const suffix = params.size === 0 ? '' : `?${params.toString()}`;
    return (await this.#json<{ events: AuditEvent[] }>('GET', `${sandboxPath(sandboxId)}/audit${suffix}`))
      .events;
  }

  /** Replaces the file rules the sandbox's worker enforces. */
  async setRules(sandboxId: string, rules: readonly PermissionRule[]): Promise<void> {
    await this.#json('PUT', `${this.#sandboxPath(sandboxId)}/rules`, { rules });
  }

  async discard(sandboxId: string, options: { readonly paths?: readonly string[] }): Promise<void> {
    await this.#json('POST', `${this.#sandboxPath(sandboxId)}/discard`, options);
  }

  /** Opens a session (a shell on the node, @agentfense/sessions) under the id the API tier chose. */
  async openSession(sandboxId: string, request: RemoteSessionRequest): Promise<SessionInfo> {
    const wire = await this.#json<WireSession>('POST', `${this.#sandboxPath(sandboxId)}/sessions`, request);
    return sessionInfo(wire, sandboxId);
  }

  async session(sandboxId: string, sessionId: string): Promise<SessionInfo> {
    return sessionInfo(
      await this.#json<WireSession>('GET', this.#sessionPath(sandboxId, sessionId)),
      sandboxId,
    );
  }

  async listSessions(sandboxId: string): Promise<SessionInfo[]> {
    const r = await this.#json<{ sessions: WireSession[] }>(
      'GET',
      `${this.#sandboxPath(sandboxId)}/sessions`,
    );
    return r.sessions.map((wire) => sessionInfo(wire, sandboxId));
  }

  async closeSession(sandboxId: string, sessionId: string): Promise<void> {
    await this.#json('DELETE', this.#sessionPath(sandboxId, sessionId));
  }

  /**
   * Runs one command in a session. The answer is NDJSON: blank lines while the command runs, then its
   * result (or an error); no call timeout, as the command's own `timeoutMs` bounds it.
   */
  async sessionExec(
    sandboxId: string,
    sessionId: string,
    request: { readonly command: string; readonly stdin?: Uint8Array; readonly timeoutMs?: number },
  ): Promise<SessionExecResult> {
    const { stdin, ...rest } = request;
    const res = await this.#send('POST', `${this.#sessionPath(sandboxId, sessionId)}/exec`, {
      body: { ...rest, ...(stdin === undefined ? {} : { stdin: Buffer.from(stdin).toString('base64') }) },
    });
    if (!res.ok) throw await this.#answerError(res);
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      throw unreachable(this.address, err);
    }
    const last = text
      .split('\n')
      .filter((l) => l !== '')
      .at(-1);
    if (last === undefined) throw unreachable(this.address, new Error('the session answer ended early'));
    const l = parseLine(last);
    if (typeof l['error'] === 'object' && l['error'] !== null) throw this.#wireError(l['error']);
    const r = l['result'] as (Omit<SessionExecResult, 'stdout' | 'stderr'> & WireOutput) | undefined;
    if (typeof r !== 'object' || r === null) throw new ProtocolError('the node agent sent no session result');
    return { ...r, stdout: Buffer.from(r.stdout, 'base64'), stderr: Buffer.from(r.stderr, 'base64') };
  }

  /** Runs one command; output is handed over as it arrives, the exit status is the answer's last line. */
  async exec(sandboxId: string, request: RemoteExecRequest): Promise<RemoteExecExit> {
    const { signal, onStdout, onStderr, stdin, ...rest } = request;
    const res = await this.#send('POST', `${this.#sandboxPath(sandboxId)}/exec`, {
      body: { ...rest, ...(stdin === undefined ? {} : { stdin: Buffer.from(stdin).toString('base64') }) },
      ...(signal === undefined ? {} : { signal }),
    });
    if (!res.ok) throw await this.#answerError(res);
    if (res.body === null) throw new ProtocolError('the node agent answered an exec without a body');
    let pending = '';
    let exit: RemoteExecExit | undefined;
    const decoder = new TextDecoder();
    const take = async (line: string): Promise<void> => {
      if (line === '') return;
      const l = parseLine(line);
      if (typeof l['stdout'] === 'string') await onStdout?.(Buffer.from(l['stdout'], 'base64'));
      else if (typeof l['stderr'] === 'string') await onStderr?.(Buffer.from(l['stderr'], 'base64'));
      else if (typeof l['exit'] === 'object' && l['exit'] !== null) exit = l['exit'] as RemoteExecExit;
      else if (typeof l['error'] === 'object' && l['error'] !== null) throw this.#wireError(l['error']);
    };
    try {
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        pending += decoder.decode(chunk, { stream: true });
        const lines = pending.split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines) await take(line);
      }
      await take(pending + decoder.decode());
    } catch (err) {
      if (signal?.aborted === true || err instanceof AgentFenseError) throw err;
      throw unreachable(this.address, err);
    }
    if (exit === undefined) throw unreachable(this.address, new Error('the exec answer ended early'));
    return exit;
  }

  async #json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.#send(method, path, {
      ...(body === undefined ? {} : { body }),
      signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
    });
    if (!res.ok) throw await this.#answerError(res);
    const text = await res.text();
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new ProtocolError(`the node agent at ${this.address} answered ${method} ${path} with no JSON`);
    }
  }

  /** The node agent's `{error: {code, message}}` as AgentFense's error; anything else is an internal one. */
  async #answerError(res: Response): Promise<Error> {
    const text = await res.text().catch(() => '');
    try {
      const body = JSON.parse(text) as { error?: unknown };
      if (typeof body.error === 'object' && body.error !== null) return this.#wireError(body.error);
    } catch {
      // below
    }
    return new InternalError(
      `the node agent at ${this.address} answered HTTP ${res.status} without an error`,
    );
  }

  /**
   * An error the node agent sent, with the token cut out of it: a node agent (or whatever answers at its
   * address) that echoed the request's Authorization header would otherwise hand the token to the API
   * client and the logs (test/security/serve-node-agent.test.ts).
   */
  #wireError(wire: object): AgentFenseError {
    const scrubbed = JSON.parse(JSON.stringify(wire).split(this.#token).join('***')) as {
      code: unknown;
      message: unknown;
      details?: unknown;
    };
    return fromWire(scrubbed);
  }

  async #send(
    method: string,
    path: string,
    options: { readonly body?: unknown; readonly signal?: AbortSignal },
  ): Promise<Response> {
    try {
      return await fetch(`${this.#base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.#token}`,
          ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
        redirect: 'error',
      });
    } catch (err) {
      throw unreachable(this.address, err);
    }
  }
}

const sandboxPath = (id: string): string => `/v1/sandboxes/${encodeURIComponent(id)}`;
const sessionPath = (id: string, sessionId: string): string =>
  `${sandboxPath(id)}/sessions/${encodeURIComponent(sessionId)}`;

interface WireOutput {
  readonly stdout: string;
  readonly stderr: string;
}
type WireSession = Omit<SessionInfo, 'createdAt' | 'lastActiveAt'> & {
  readonly createdAt: string;
  readonly lastActiveAt: string;
};

/** The node names the sandbox by its placement id; the API's answer names the sandbox. */
function sessionInfo(wire: WireSession, sandboxId: string): SessionInfo {
  return {
    ...wire,
    sandboxId,
    createdAt: new Date(wire.createdAt),
    lastActiveAt: new Date(wire.lastActiveAt),
  };
}
const pathQuery = (path: string): string => new URLSearchParams({ path }).toString();

function unreachable(address: string, err: unknown): RemoteSandboxError {
  // fetch's own message is "fetch failed"; the cause says why (ECONNREFUSED, a timeout).
  const cause = err instanceof Error && err.cause instanceof Error ? err.cause : err;
  const why = cause instanceof Error ? cause.message : String(cause);
  return new RemoteSandboxError(
    'node-agent-unreachable',
    `the node agent at ${address} did not answer: ${why}`,
    {
      details: { nodeAgent: address },
    },
  );
}

function parseLine(line: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(line);
    if (typeof value === 'object' && value !== null) return value as Record<string, unknown>;
  } catch {
    // below
  }
  throw new ProtocolError('the node agent sent an exec line that is not a JSON object');
}
