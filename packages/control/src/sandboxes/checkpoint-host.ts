// The checkpoint service wired to the rest of the control plane: worker calls on a sandbox's delta
// (running or not), its audit trail, and creating and starting forks through the plane's own methods.
import type { Logger } from 'pino';
import type { AuditEvent } from '@agentfense/protocol';
import type { DataLayout } from '../paths.js';
import type { MetadataStore } from '../store/metadata.js';
import { AuditWriter } from '@agentfense/audit-trail';
import type { CheckpointLimits } from './checkpoint-limits.js';
import { CheckpointService } from './checkpoints.js';
import type { CompactionStep } from './compactor.js';
import type { SandboxManager } from './manager.js';
import type { CreateSandboxOptions, SandboxInfo } from './types.js';

/** The plane's methods a fork goes through (its checks and disk guard apply). */
export interface ForkPlane {
  createSandbox(options: CreateSandboxOptions): Promise<SandboxInfo>;
  startSandbox(id: string): Promise<SandboxInfo>;
}

export function checkpointService(o: {
  readonly metadata: MetadataStore;
  readonly layout: DataLayout;
  readonly sandboxes: SandboxManager;
  /** Called only once a fork is asked for, when the plane exists. */
  readonly plane: () => ForkPlane;
  readonly logger: Logger;
  readonly limits: CheckpointLimits;
  readonly compactionFault?: ((step: CompactionStep) => void) | undefined;
}): CheckpointService {
  const logger = o.logger.child({ component: 'checkpoints' });
  return new CheckpointService({
    store: o.metadata.checkpoints,
    layout: o.layout,
    worker: {
      checkpoint: (id, layerDir) => o.sandboxes.onDelta(id, 'checkpoint', { layerDir }),
      restore: async (id, frozen) => {
        await o.sandboxes.onDelta(id, 'restore', { frozen });
      },
      compactLayers: (id, from, to, switchStack) =>
        o.sandboxes.onDelta(id, 'compactLayers', { from, to, switchStack }),
      setFrozenBytes: (id, bytes) => o.sandboxes.setFrozenBytes(id, bytes),
      audit: (id, events) => appendAudit(o.layout, o.sandboxes.liveAudit(id), id, events, logger),
    },
    host: {
      parent: (id) => o.metadata.sandboxes.get(id),
      create: (options) => o.plane().createSandbox(options),
      start: (id) => o.plane().startSandbox(id),
    },
    trash: o.sandboxes.trash,
    logger,
    limits: o.limits,
    ...(o.compactionFault === undefined ? {} : { compactionFault: o.compactionFault }),
  });
}

/** Through the running sandbox's writer, else straight to its trail's file. */
async function appendAudit(
  layout: DataLayout,
  live: AuditWriter | undefined,
  id: string,
  events: readonly AuditEvent[],
  logger: Logger,
): Promise<void> {
  if (live !== undefined) {
    live.append(events);
    return;
  }
  const writer = new AuditWriter(layout.sandbox(id).auditLog, (err) =>
    logger.error({ err, sandboxId: id }, 'could not write the audit trail'),
  );
  writer.append(events);
  await writer.flush();
}
