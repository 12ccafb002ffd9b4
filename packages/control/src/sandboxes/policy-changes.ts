// Replacing a sandbox's policies — its file rules, its network policy and its secrets' values — while it
// runs or not: the live parts apply the change first (the worker's rules, the policy point's), then the
// record keeps it.
import type { Logger } from 'pino';
import { WrongStateError } from '@agentfense/protocol';
import { validateNetworkPolicy } from '@agentfense/network';
import type { NetworkPolicyInput } from '@agentfense/network';
import { validateId } from '../ids.js';
import type { PresetRegistry } from '../presets/registry.js';
import type { SandboxPatch, SandboxStore } from '../store/sandboxes.js';
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
}

export class PolicyChanges {
  readonly #deps: PolicyChangeDeps;

  constructor(deps: PolicyChangeDeps) {
    this.#deps = deps;
  }

  setRules(id: string, policy: { rules?: readonly unknown[]; preset?: string }): Promise<SandboxInfo> {
    validateId('sandbox', id);
    const rules = resolveRules(this.#deps.presets, policy);
    return this.#replace(id, { rules }, (live) => live.supervisor.setRules(rules));
  }

  setNetwork(id: string, input: boolean | NetworkPolicyInput): Promise<SandboxInfo> {
    validateId('sandbox', id);
    const network = validateNetworkPolicy(input);
    return this.#replace(id, { network }, (live) => applyNetworkPolicy(id, live, network));
  }

  /** Gives (or replaces) the value of a declared secret (secret-values.ts). */
  async setSecret(id: string, name: string, source: SecretValueSource): Promise<SandboxInfo> {
    validateId('sandbox', id);
    await setSecretValue(this.#deps, id, name, source);
    return this.#deps.info(id);
  }

  #replace(id: string, patch: SandboxPatch, apply: (live: Live) => Promise<unknown>): Promise<SandboxInfo> {
    const { locks, store, owner, logger } = this.#deps;
    return locks.run(id, async () => {
      const row = await store.get(id);
      const live = this.#deps.live.get(id);
      if (live === undefined && owner.ownedElsewhere(row)) {
        throw new WrongStateError(`sandbox ${id} is running in control-plane process ${row.owner_pid}`);
      }
      if (live !== undefined) await apply(live);
      await store.update(id, patch);
      logger.info({ sandboxId: id, replaced: Object.keys(patch) }, 'policy replaced');
      return this.#deps.info(id);
    });
  }
}
