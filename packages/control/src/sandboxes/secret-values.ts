// Giving a declared secret of an existing sandbox its value, running or not (setSecret): the value is
// read from its source here, checked as at create, held in this process's memory, handed to a running
// policy point over its IPC channel, and audited by name. The record keeps where the value came from
// (never the value), so a later start reads it again from there; a value given as it is is not kept.
import { NotFoundError, UnavailableError, WrongStateError } from '@agentfense/protocol';
import { secretBinding, validateSecrets } from '@agentfense/network';
import type { NetworkAuditEvent } from '@agentfense/network';
import type { Logger } from 'pino';
import type { DataLayout } from '../paths.js';
import { originOf, resolveSecrets } from '../secret-sources.js';
import type { SecretSource } from '../secret-sources.js';
import type { SandboxStore } from '../store/sandboxes.js';
import { AuditWriter } from '@agentfense/audit-trail';
import type { KeyedLock } from './keyed-lock.js';
import type { Ownership } from './ownership.js';
import type { SecretVault } from './secrets.js';
import type { Live } from './start.js';

/** Where a secret's new value comes from: exactly one of these (env, file, command: the caller's process). */
export type SecretValueSource =
  | { readonly value: string }
  | { readonly env: string }
  | { readonly file: string }
  | { readonly command: readonly string[] };

export interface SecretValueDeps {
  readonly locks: KeyedLock;
  readonly store: SandboxStore;
  readonly live: ReadonlyMap<string, Live>;
  readonly owner: Ownership;
  readonly logger: Logger;
  readonly layout: DataLayout;
  readonly secrets: SecretVault;
}

function sourceKind(source: SecretValueSource): 'value' | 'env' | 'file' | 'command' {
  if ('value' in source) return 'value';
  if ('env' in source) return 'env';
  if ('file' in source) return 'file';
  return 'command';
}

/** Gives (or replaces) the value of secret `name` of sandbox `id`; the caller validated `id`. */
export function setSecretValue(
  deps: SecretValueDeps,
  id: string,
  name: string,
  source: SecretValueSource,
): Promise<void> {
  const { locks, store, owner, logger } = deps;
  return locks.run(id, async () => {
    const row = await store.get(id);
    const kept = row.secrets.find((s) => s.name === name);
    if (kept === undefined) {
      const declared = row.secrets.map((s) => s.name).join(', ');
      throw new NotFoundError(
        `sandbox ${id} declares no secret ${JSON.stringify(name)} (${declared === '' ? 'it declares none' : `its secrets: ${declared}`}): a secret's name and hosts are fixed at create (--secret NAME@HOST); give a value to one of its own`,
      );
    }
    const live = deps.live.get(id);
    if (live === undefined && owner.ownedElsewhere(row)) {
      throw new WrongStateError(
        `sandbox ${id} is running in control-plane process ${row.owner_pid}: give the value through that process (agentfense sandbox secret --server URL, or its HTTP or gRPC API)`,
      );
    }
    const full: SecretSource = { ...secretBinding(kept), ...source };
    const origin = originOf(full);
    // Checked as at create; an error names the secret and what is wrong, never the value.
    const [input] = validateSecrets(await resolveSecrets([full]));
    if (input === undefined) throw new NotFoundError(`secret ${name}: no value was read`);
    const secret = { ...input, placeholder: kept.placeholder };
    // The running policy point first: if it cannot take the value, nothing else changes.
    if (live?.network !== undefined && !(await live.network.setSecret(secret))) {
      throw new UnavailableError(
        `sandbox ${id}: its network policy point did not take the value of secret ${name}; stop the sandbox and start it again`,
      );
    }
    const before = deps.secrets.held(id).reason;
    const held = deps.secrets.give(id, row.secrets, secret, origin);
    await store.update(id, {
      secrets: row.secrets.map((s) => (s.name === name ? { ...s, source: origin } : s)),
      // The state reason names the secrets that lacked a value: it follows, unless it says something else.
      ...(row.state_reason !== null && row.state_reason === before ? { state_reason: held.reason } : {}),
    });
    const event: NetworkAuditEvent = {
      time: Date.now(),
      op: 'secret-set',
      path: name,
      decision: 'allow',
      reason: `secret ${name} given a value (${sourceKind(source)}) through the control plane`,
      secret: name,
      via: 'control',
    };
    if (live !== undefined) live.audit.append([event]);
    else {
      const writer = new AuditWriter(deps.layout.sandbox(id).auditLog, (err) =>
        logger.error({ err, sandboxId: id }, 'could not write the audit trail'),
      );
      writer.append([event]);
      await writer.flush();
    }
    logger.info({ sandboxId: id, secret: name, source: sourceKind(source) }, 'secret value given');
  });
}
