// A registry of open sessions: ids → sessions, per-sandbox listing, and closing every session of a
// sandbox when it stops (contract §5). Closed sessions leave the registry by themselves (onClose).
import type { RuntimeInstance } from '@agentfense/protocol';
import { NotFoundError } from '@agentfense/protocol';
import type { SandboxSecret } from '@agentfense/network';
import { redact } from '../sandboxes/secrets.js';
import { assertSessionId, createSession } from '@agentfense/sessions';
import type { CreateSessionOptions, SessionCloseReason } from '@agentfense/sessions';
import type { Session } from '@agentfense/sessions';

export interface SessionManagerOptions {
  /** Default idle timeout of sessions created here (each create may override it). */
  readonly idleTimeoutMs?: number;
  /** Passed to every session. */
  readonly logger?: CreateSessionOptions['logger'];
}

/** Owns the open sessions of a control plane (one instance per control plane; no module state). */
export class SessionManager {
  readonly #sessions = new Map<string, Session>();
  readonly #options: SessionManagerOptions;

  constructor(options: SessionManagerOptions = {}) {
    this.#options = options;
  }

  /** Starts a session in `instance` and registers it until it closes. */
  async create(
    instance: RuntimeInstance,
    options: CreateSessionOptions = {},
    secrets: () => readonly SandboxSecret[] = () => [],
  ): Promise<Session> {
    const callerOnClose = options.onClose;
    const session = await createSession(instance, {
      ...(this.#options.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: this.#options.idleTimeoutMs }),
      ...(this.#options.logger === undefined ? {} : { logger: this.#options.logger }),
      ...options,
      // A secret's value that reached the sandbox another way is masked in every command's result.
      redact: (result) => redact(result, secrets()),
      onClose: (closed) => {
        this.#sessions.delete(closed.id);
        callerOnClose?.(closed);
      },
    });
    // It may have closed already (a shell that exits at once): register only open ones.
    if (session.status === 'open') this.#sessions.set(session.id, session);
    return session;
  }

  /** The open session `id`; NotFoundError when unknown or closed, InvalidArgumentError when malformed. */
  get(id: string): Session {
    assertSessionId(id);
    const session = this.#sessions.get(id);
    if (session === undefined) throw new NotFoundError(`session ${id} not found`);
    return session;
  }

  /** Open sessions, optionally only those of one sandbox. */
  list(filter: { sandboxId?: string } = {}): Session[] {
    return [...this.#sessions.values()].filter(
      (s) => filter.sandboxId === undefined || s.sandboxId === filter.sandboxId,
    );
  }

  /** Closes session `id` (NotFoundError when unknown). */
  async close(id: string): Promise<void> {
    await this.get(id).close();
  }

  /** Closes every session of a sandbox that is stopping or being destroyed. */
  async closeSandbox(sandboxId: string, reason: SessionCloseReason = 'sandbox-stopped'): Promise<void> {
    await Promise.all(this.list({ sandboxId }).map((s) => s.close({ reason })));
  }

  /** The sandbox's worker was replaced under its sessions: each re-enters its cwd before its next command. */
  workspaceRemounted(sandboxId: string): void {
    for (const session of this.list({ sandboxId })) session.workspaceRemounted();
  }

  /** Closes every session (control plane shutdown). */
  async closeAll(): Promise<void> {
    await Promise.all(this.list().map((s) => s.close()));
  }
}
