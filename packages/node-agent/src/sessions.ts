// The sessions of one attached sandbox: persistent shells (@agentfense/sessions, the same framing the
// control plane uses on one host) run here, on the sandbox's node, so every API replica reaches the same
// session through this agent and none keeps its state. The API tier names the session id (it records
// which sandbox holds it); a session ends when closed, when its shell exits, idles out, or the sandbox
// is detached.
import { AlreadyExistsError, InvalidArgumentError, NotFoundError } from '@agentfense/protocol';
import {
  assertSessionId,
  createSession,
  newSessionId,
  type CreateSessionOptions,
  type Session,
  type SessionInfo,
} from '@agentfense/sessions';
import type { SessionHost } from './session-spawn.js';

/** At most this many sessions per sandbox. */
const MAX_SESSIONS = 16;

/** What the API tier may set when it opens a session. */
export type OpenSessionOptions = Pick<CreateSessionOptions, 'id' | 'shell' | 'env' | 'cwd' | 'idleTimeoutMs'>;

export class Sessions {
  readonly #sessions = new Map<string, Session>();
  /** Ids being opened: a second open of the same id is refused, not raced. */
  readonly #opening = new Set<string>();
  #closed = false;

  constructor(private readonly host: SessionHost) {}

  get count(): number {
    return this.#sessions.size;
  }

  async open(options: OpenSessionOptions): Promise<SessionInfo> {
    const id = options.id ?? newSessionId();
    assertSessionId(id);
    if (this.#sessions.has(id) || this.#opening.has(id)) {
      throw new AlreadyExistsError(`session ${id} exists`, { details: { id } });
    }
    if (this.#sessions.size + this.#opening.size >= MAX_SESSIONS) {
      throw new InvalidArgumentError(`at most ${MAX_SESSIONS} sessions per sandbox`);
    }
    this.#opening.add(id);
    try {
      const session = await createSession(this.host, {
        ...options,
        id,
        onClose: (closed) => this.#sessions.delete(closed.id),
      });
      // Detached while the shell started: it must not outlive the sandbox's attach.
      if (this.#closed) await session.close({ reason: 'sandbox-stopped' });
      else if (session.status === 'open') this.#sessions.set(session.id, session);
      return session.info();
    } finally {
      this.#opening.delete(id);
    }
  }

  /** The open session `id` of this sandbox (NotFoundError otherwise). */
  get(id: string): Session {
    assertSessionId(id);
    const session = this.#sessions.get(id);
    if (session === undefined) throw new NotFoundError(`session ${id} not found`, { details: { id } });
    return session;
  }

  list(): SessionInfo[] {
    return [...this.#sessions.values()].map((s) => s.info());
  }

  async close(id: string): Promise<void> {
    await this.get(id).close();
  }

  /**
   * The view was put back after its worker was replaced: a shell's working directory is still in the
   * dead view, so the open sessions end saying so (new ones see the new view).
   */
  async closeAfterRestart(): Promise<void> {
    await Promise.all([...this.#sessions.values()].map((s) => s.close({ reason: 'worker-restarted' })));
  }

  /** The sandbox is being detached: every session ends, and none opens after. */
  async closeAll(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#sessions.values()].map((s) => s.close({ reason: 'sandbox-stopped' })));
  }
}
