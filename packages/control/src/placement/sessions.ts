// Sessions of sandboxes placed on cluster nodes. The shell and everything it keeps (cwd, variables, the
// command queue) live on the sandbox's node, in its node agent (@agentfense/sessions over af-init); the
// store records only which sandbox holds each session id, so every API replica routes a call that names
// the session alone, and none keeps session state. The sandbox's env is the shell's base environment, as
// it is for exec.
import { NotFoundError } from '@agentfense/protocol';
import {
  assertSessionId,
  newSessionId,
  type CreateSessionOptions,
  type SessionExecOptions,
  type SessionExecResult,
  type SessionInfo,
} from '@agentfense/sessions';
import type { PlacedSessionStore } from '../store/placed-sessions.js';
import type { SandboxRow } from '../store/sandboxes.js';
import { RemoteSandboxError } from './errors.js';
import type { NodeAgentClient } from './node-agent-client.js';

export interface PlacedSessionsDeps {
  readonly records: PlacedSessionStore;
  /** The sandbox's record (placed and running) and its node agent's client. */
  readonly route: (sandboxId: string) => Promise<{ row: SandboxRow; client: NodeAgentClient }>;
  /** Drops the cached location when the node agent did not answer. */
  readonly unreachable: <T>(sandboxId: string, call: Promise<T>) => Promise<T>;
}

export class PlacedSessions {
  readonly #deps: PlacedSessionsDeps;

  constructor(deps: PlacedSessionsDeps) {
    this.#deps = deps;
  }

  /** The sandbox holding session `id` (NotFoundError when no record names it). */
  async sandboxOf(id: string): Promise<string> {
    assertSessionId(id);
    const sandboxId = await this.#deps.records.sandboxOf(id);
    if (sandboxId === undefined) throw notFound(id);
    return sandboxId;
  }

  async create(sandboxId: string, options: CreateSessionOptions = {}): Promise<SessionInfo> {
    const { row, client } = await this.#deps.route(sandboxId);
    const id = options.id ?? newSessionId();
    assertSessionId(id);
    const env = { ...row.env, ...options.env };
    // Recorded first: a replica that learns the id from the answer can route it at once.
    await this.#deps.records.insert({ id, sandboxId, createdAt: Date.now() });
    try {
      return await this.#deps.unreachable(
        sandboxId,
        client.openSession(sandboxId, {
          id,
          ...(options.shell === undefined ? {} : { shell: options.shell }),
          ...(Object.keys(env).length === 0 ? {} : { env }),
          ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
          ...(options.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: options.idleTimeoutMs }),
        }),
      );
    } catch (err) {
      await this.#deps.records.delete(id);
      throw err;
    }
  }

  get(id: string): Promise<SessionInfo> {
    return this.#call(id, (client, sandboxId) => client.session(sandboxId, id));
  }

  /** The open sessions of a sandbox; none when it is not running on a node. */
  async list(sandboxId: string): Promise<SessionInfo[]> {
    let routed;
    try {
      routed = await this.#deps.route(sandboxId);
    } catch (err) {
      if (err instanceof RemoteSandboxError && err.reason === 'not-placed') return [];
      throw err;
    }
    return this.#deps.unreachable(sandboxId, routed.client.listSessions(sandboxId));
  }

  run(id: string, command: string, options: SessionExecOptions = {}): Promise<SessionExecResult> {
    const stdin = typeof options.stdin === 'string' ? Buffer.from(options.stdin) : options.stdin;
    return this.#call(id, (client, sandboxId) =>
      client.sessionExec(sandboxId, id, {
        command,
        ...(stdin === undefined ? {} : { stdin }),
        ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      }),
    );
  }

  async close(id: string): Promise<void> {
    await this.#call(id, (client, sandboxId) => client.closeSession(sandboxId, id));
    await this.#deps.records.delete(id);
  }

  /** A call on the session's node; a session its node no longer has (ended, node lost) is forgotten. */
  async #call<T>(id: string, act: (client: NodeAgentClient, sandboxId: string) => Promise<T>): Promise<T> {
    const sandboxId = await this.sandboxOf(id);
    const { client } = await this.#deps.route(sandboxId);
    try {
      return await this.#deps.unreachable(sandboxId, act(client, sandboxId));
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      await this.#deps.records.delete(id);
      throw notFound(id);
    }
  }
}

function notFound(id: string): NotFoundError {
  return new NotFoundError(`session ${id} not found`, { details: { id } });
}
