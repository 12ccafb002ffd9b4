// Starting a placed sandbox from the orchestrator's warm pool: an idle placement (a container placed ahead
// of time, nothing attached in it) is claimed in the shared database, where the insert on its id decides
// between replicas, and then marked claimed on the orchestrator. The pool is refilled in the background
// after each claim and every REFILL_INTERVAL_MS, so a burst of starts is not limited by one refill.
import type { Logger } from 'pino';
import type { ResourceRequest, WarmPool } from '@agentfense/orchestrator';
import type { WarmClaimStore } from '../store/warm-claims.js';

const REFILL_INTERVAL_MS = 5_000;
/**
 * How long a claim may stay unfinished (claimed in the database, still idle on the orchestrator) before
 * its replica counts as gone: finishing it is one relabel, which fails within the manager's 15 s request
 * timeout; four times that leaves room for a slow manager.
 */
export const STALE_CLAIM_MS = 60_000;

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

/**
 * Removes the idle placements whose claim never finished: claimed in the database more than `staleMs`
 * ago, still idle on the orchestrator (the replica that claimed it died before marking it). Nobody can
 * claim them again (the claim row stays) and they hold a node's room; retire() fails instead if the
 * claim finished meanwhile. Returns the placement ids removed.
 */
export async function retireUnfinishedClaims(deps: {
  readonly warm: WarmPool;
  readonly claims: WarmClaimStore;
  readonly now: number;
  readonly staleMs?: number;
}): Promise<string[]> {
  const removed: string[] = [];
  for (const placementId of await deps.warm.unclaimed()) {
    const at = await deps.claims.claimedAt(placementId);
    if (at === undefined || deps.now - at < (deps.staleMs ?? STALE_CLAIM_MS)) continue;
    if (!(await deps.warm.retire(placementId))) continue;
    await deps.claims.releasePlacement(placementId, deps.now);
    removed.push(placementId);
  }
  return removed;
}

/** Keeps the warm pool at its size: now, after each claim, and every few seconds. */
export class WarmRefiller {
  readonly #warm: WarmPool;
  readonly #claims: WarmClaimStore;
  readonly #logger: Logger;
  #running: Promise<void> | undefined;
  #again = false;
  readonly #timer: NodeJS.Timeout;
  #closed = false;

  constructor(options: {
    readonly warm: WarmPool;
    readonly claims: WarmClaimStore;
    readonly logger: Logger;
  }) {
    this.#warm = options.warm;
    this.#claims = options.claims;
    this.#logger = options.logger;
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
    this.#running = this.#refill()
      .catch((err: unknown) => this.#logger.warn({ err }, 'warm pool not refilled'))
      .finally(() => {
        this.#running = undefined;
        if (this.#again) {
          this.#again = false;
          this.poke();
        }
      });
  }

  async #refill(): Promise<void> {
    const removed = await retireUnfinishedClaims({ warm: this.#warm, claims: this.#claims, now: Date.now() });
    if (removed.length > 0)
      this.#logger.warn({ removed }, 'removed warm placements whose claim never finished');
    await this.#warm.refill();
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#running;
  }
}
