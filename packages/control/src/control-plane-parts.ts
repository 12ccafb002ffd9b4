// What ControlPlane.open() hands the ControlPlane it made: the parts its methods delegate to.
import type { Logger } from 'pino';
import type { CodebaseService } from './codebases/service.js';
import type { DiskGuard } from './disk/guard.js';
import type { DataLayout } from './paths.js';
import type { OrchestratedSandboxes } from './placement/orchestrated.js';
import type { CheckpointService } from './sandboxes/checkpoints.js';
import type { SandboxHostUsers } from './sandboxes/host-user.js';
import type { SandboxManager } from './sandboxes/manager.js';
import type { RuntimeRegistry } from './sandboxes/runtimes.js';
import type { SessionManager } from './sessions/manager.js';
import type { MetadataStore } from './store/metadata.js';
import type { SandboxStore } from './store/sandboxes.js';

export interface ControlPlaneParts {
  readonly dataDir: string;
  readonly layout: DataLayout;
  readonly logger: Logger;
  readonly metadata: MetadataStore;
  readonly store: SandboxStore;
  readonly codebases: CodebaseService;
  readonly sandboxes: SandboxManager;
  readonly sessions: SessionManager;
  readonly reapIntervalMs: number;
  readonly runtimes: RuntimeRegistry;
  readonly disk: DiskGuard;
  readonly hostUsers: SandboxHostUsers;
  readonly checkpoints: CheckpointService;
  /** Sandboxes placed on cluster nodes instead of run here (`placement` option); undefined: here. */
  readonly placed: OrchestratedSandboxes | undefined;
}
