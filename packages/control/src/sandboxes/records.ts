// Sandbox records: what create validates into a new row, and filtered, paginated listings.
import { validateNetworkPolicy } from '@agentfense/network';
import { validateEnv } from '@agentfense/protocol';
import type { ResourceLimits } from '@agentfense/protocol';
import type { CodebaseService } from '../codebases/service.js';
import { newId, validateId } from '../ids.js';
import { resolvePolicy } from '../policy.js';
import type { PresetRegistry } from '../presets/registry.js';
import { decodePageToken, encodePageToken, pageSize } from '../store/pagination.js';
import { sandboxInfo } from '../store/sandboxes.js';
import type { NewSandboxRow, SandboxStore } from '../store/sandboxes.js';
import type { RuntimeRegistry } from './runtimes.js';
import type { CreateSandboxOptions, ListSandboxesOptions, Page, SandboxInfo } from './types.js';
import { SPARE_LABEL } from './one-shot.js';
import { SecretVault } from './secrets.js';
import { checkExpiresIn, checkImage, checkLabels, checkResources, checkUserLabels } from './validate.js';

export interface RecordDeps {
  readonly codebases: CodebaseService;
  readonly runtimes: RuntimeRegistry;
  readonly presets: PresetRegistry | undefined;
  readonly defaultRuntime: string;
  /** Limits of sandboxes that do not set them, already checked. */
  readonly defaultResources: ResourceLimits;
  /** Where a new sandbox's secrets are kept (in memory only). */
  readonly secrets: SecretVault;
}

/** Rules from explicit rules or a preset (validated; the error names the rule's index). */
export function resolveRules(
  presets: PresetRegistry | undefined,
  policy: { rules?: readonly unknown[] | undefined; preset?: string | undefined },
): ReturnType<typeof resolvePolicy> {
  return resolvePolicy({
    preset: policy.preset,
    rules: policy.rules,
    ...(presets === undefined ? {} : { registry: presets }),
  });
}

/**
 * What only the product's own callers ask of a create. `own`: this process owns the sandbox from its
 * INSERT. `spare`: the run helper's spare sandbox, which carries the reserved SPARE_LABEL.
 */
export interface CreateInternal {
  readonly own?: boolean;
  readonly spare?: boolean;
}

/**
 * The row of a new PENDING sandbox created at `now` (ms); every option is validated here. */
export async function newSandboxRow(
  deps: RecordDeps,
  options: CreateSandboxOptions,
  now: number,
  internal: CreateInternal = {},
): Promise<NewSandboxRow> {
  const codebaseId = validateId('codebase', options.codebaseId);
  await deps.codebases.get(codebaseId); // NotFoundError naming it
  const rules = resolveRules(deps.presets, options);
  const runtime = deps.runtimes.check(options.runtime ?? deps.defaultRuntime);
  const image = checkImage(runtime, (await deps.runtimes.get(runtime)).traits, options.image);
  const labels = checkUserLabels(options.labels ?? {});
  if (internal.spare === true) labels[SPARE_LABEL] = 'true';
  const env = validateEnv(options.env ?? {});
  // Every sandbox gets limits: what it asks for, the configured defaults for the rest.
  const resources = { ...deps.defaultResources, ...checkResources(options.resources ?? {}) };
  const expiresIn = checkExpiresIn(options.expiresIn);
  const network = validateNetworkPolicy(options.network);
  const id = newId('sandbox');
  // Read and validated with the rest; the values kept in memory once the row is made (a create refused
  // here keeps nothing), the bindings and sources in the row.
  const { secrets, stored } = await SecretVault.prepare(options.secrets, network);
  deps.secrets.set(id, secrets, stored);
  return {
    id,
    codebase_id: codebaseId,
    state: 'PENDING',
    state_reason: null,
    runtime,
    image,
    rules,
    network,
    resources,
    env,
    audit_allowed: options.auditAllowed === true,
    labels,
    expires_at: expiresIn === undefined ? null : now + Math.round(expiresIn * 1000),
    created_at: now,
    updated_at: now,
    secrets: stored,
  };
}

/** Filtered listing in creation order, one page at a time. */
export async function listSandboxes(
  store: SandboxStore,
  options: ListSandboxesOptions,
): Promise<Page<SandboxInfo>> {
  const limit = pageSize(options.pageSize);
  const rows = await store.query({
    codebaseId: options.codebaseId === undefined ? undefined : validateId('codebase', options.codebaseId),
    state: options.state,
    labels: options.labels === undefined ? undefined : checkLabels(options.labels),
    // An idle spare is internal: only a filter on its reserved key lists it.
    withoutLabelKeys: options.labels?.[SPARE_LABEL] === undefined ? [SPARE_LABEL] : [],
    codebaseVisibility: options.apiVisibleOnly === true ? 'api' : undefined,
    after: options.pageToken === undefined ? undefined : decodePageToken(options.pageToken),
    limit: limit + 1,
  });
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return {
    items: items.map(sandboxInfo),
    nextPageToken:
      rows.length > limit && last !== undefined
        ? encodePageToken({ createdAt: last.created_at, id: last.id })
        : null,
  };
}
