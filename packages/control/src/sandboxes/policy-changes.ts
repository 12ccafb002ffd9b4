// Replacing a sandbox's policies — its file rules, its network policy and its secrets' values — while it
// runs or not: the live parts apply the change first (the worker's rules, the policy point's), then the
// record keeps it. A sandbox running on a cluster node gets its rules through its node agent; its other
// policies are refused there (it has no network, so no policy point), never only recorded: a change the
// running sandbox does not enforce must not look applied.
import type { Logger } from 'pino';
import { WrongStateError, type PermissionRule } from '@agentfense/protocol';
import { validateNetworkPolicy } from '@agentfense/network';
import type { NetworkPolicyInput } from '@agentfense/network';
import { validateId } from '../ids.js';
import { RemoteSandboxError } from '../placement/errors.js';
import { ORCHESTRATED } from '../placement/options.js';
import type { PresetRegistry } from '../presets/registry.js';
import type { SandboxPatch, SandboxRow, SandboxStore } from '../store/sandboxes.js';
import type { KeyedLock } from './keyed-lock.js';
import { applyNetworkPolicy } from './network.js';
import type { Ownership } from './ownership.js';
import { resolveRules } from './records.js';
import { setSecretValue } from './secret-values.js';
import type { SecretValueDeps, SecretValueSource } from './secret-values.js';
import type { Live } from './start.js';
import type { SandboxInfo } from './types.js';

export interface PolicyChangeDeps extends SecretValueDeps {
  readonly locks: KeyedLock;
  readonly store: SandboxStore;
  readonly live: ReadonlyMap<string, Live>;
  readonly owner: Ownership;
  readonly logger: Logger;
  readonly presets: PresetRegistry | undefined;
  readonly info: (id: string) => Promise<SandboxInfo>;
  /** Sandboxes placed on cluster nodes (placement/orchestrated.ts), when this plane places any. */
  readonly placed?: PlacedRules | undefined;
}

/** What changes the rules of a sandbox running on a cluster node. */
export interface PlacedRules {
  setRules(id: string, rules: readonly PermissionRule[]): Promise<void>;
}

/** How a change reaches a running sandbox: this process's live parts, or its node agent. */
interface Apply {
  readonly live: (live: Live) => Promise<unknown>;
  /** Absent: the change cannot reach a sandbox on a node. */
  readonly placed?: (placed: PlacedRules, id: string) => Promise<void>;
}

export class PolicyChanges {
  readonly #deps: PolicyChangeDeps;

  constructor(deps: PolicyChangeDeps) {
    this.#deps = deps;
  }

  setRules(id: string, policy: { rules?: readonly unknown[]; preset?: string }): Promise<SandboxInfo> {
    validateId('sandbox', id);
    const rules = resolveRules(this.#deps.presets, policy);
    return this.#replace(
      id,
      { rules },
      {
        live: (live) => live.supervisor.setRules(rules),
        placed: (placed) => placed.setRules(id, rules),
      },
    );
  }

  setNetwork(id: string, input: boolean | NetworkPolicyInput): Promise<SandboxInfo> {
    validateId('sandbox', id);
    const network = validateNetworkPolicy(input);
    return this.#replace(id, { network }, { live: (live) => applyNetworkPolicy(id, live, network) });
  }

  /** Gives (or replaces) the value of a declared secret (secret-values.ts). */
  async setSecret(id: string, name: string, source: SecretValueSource): Promise<SandboxInfo> {
    validateId('sandbox', id);
    await setSecretValue(this.#deps, id, name, source);
    return this.#deps.info(id);
  }

  #replace(id: string, patch: SandboxPatch, apply: Apply): Promise<SandboxInfo> {
    const { locks, store, owner, logger } = this.#deps;
    return locks.run(id, async () => {
      const row = await store.get(id);
      const live = this.#deps.live.get(id);
      if (live === undefined && owner.ownedElsewhere(row)) {
        throw new WrongStateError(`sandbox ${id} is running in control-plane process ${row.owner_pid}`);
      }
      if (row.owner_instance === ORCHESTRATED) await this.#onNode(row, patch, apply);
      else if (live !== undefined) await apply.live(live);
      await store.update(id, patch);
      logger.info({ sandboxId: id, replaced: Object.keys(patch) }, 'policy replaced');
      return this.#deps.info(id);
    });
  }

  /** A sandbox placed on a cluster node: the change goes to its node agent, or is refused. */
  async #onNode(row: SandboxRow, patch: SandboxPatch, apply: Apply): Promise<void> {
    const { id } = row;
    const { placed } = this.#deps;
    if (apply.placed === undefined || placed === undefined) {
      throw new RemoteSandboxError(
        'not-routed',
        `sandbox ${id} runs on a cluster node: changing its ${Object.keys(patch).join(', ')} is not routed to node agents`,
        { details: { id } },
      );
    }
    // Being placed: the attach in progress sends the record's rules as they were when it began.
    if (row.state !== 'RUNNING') {
      throw new WrongStateError(`sandbox ${id} is being placed on a node; change its rules once it runs`, {
        details: { id, state: row.state },
      });
    }
    await apply.placed(placed, id);
  }
}
