// Starting a placed sandbox from the orchestrator's warm pool: an idle placement (a container placed ahead
// of time, nothing attached in it) is claimed in the shared database, where the insert on its id decides
// between replicas, and then marked claimed on the orchestrator. The pool is refilled in the background
// after each claim and every REFILL_INTERVAL_MS, so a burst of starts is not limited by one refill.
import type { Logger } from 'pino';
import type { ResourceRequest, WarmPool } from '@agentfense/orchestrator';
import type { WarmClaimStore } from '../store/warm-claims.js';

const REFILL_INTERVAL_MS = 5_000;

/** The placement id of an idle warm placement now claimed for `sandboxId`, or undefined (none fits). */
export async function claimWarm(
  deps: { readonly warm: WarmPool; readonly claims: WarmClaimStore; readonly logger: Pick<Logger, 'warn'> },
  sandboxId: string,
  shape: { readonly image: string; readonly resources: ResourceRequest },
): Promise<string | undefined> {
  const idle = await deps.warm.idle(shape).catch((err: unknown) => {
    deps.logger.warn({ err }, 'warm pool not read; placing afresh');
    return [];
  });
  for (const placementId of idle) {
    // Another replica's claim of it stands: the next one is tried.
    if (!(await deps.claims.claim({ placementId, sandboxId, at: Date.now() }))) continue;
    const marked = await deps.warm.markClaimed(placementId, sandboxId).catch(() => false);
    if (marked) return placementId;
    // Gone meanwhile: its claim is kept (it is never claimed again) but routes this sandbox nowhere.
    await deps.claims.release(sandboxId, Date.now());
  }
  return undefined;
}

/** Keeps the warm pool at its size: now, after each claim, and every few seconds. */
export class WarmRefiller {
  readonly #warm: WarmPool;
  readonly #logger: Logger;
  #running: Promise<void> | undefined;
  #again = false;
  readonly #timer: NodeJS.Timeout;
  #closed = false;

  constructor(warm: WarmPool, logger: Logger) {
    this.#warm = warm;
    this.#logger = logger;
    this.#timer = setInterval(() => this.poke(), REFILL_INTERVAL_MS);
    this.#timer.unref();
    this.poke();
  }

  /** Refills soon (once more after the one under way, if any). */
  poke(): void {
    if (this.#closed) return;
    if (this.#running !== undefined) {
      this.#again = true;
      return;
    }
    this.#running = this.#warm
      .refill()
      .catch((err: unknown) => this.#logger.warn({ err }, 'warm pool not refilled'))
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.poke();
        }
      });
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#running;
  }
}
