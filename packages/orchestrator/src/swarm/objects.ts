// What the Swarm adapter sends and reads: the one-replica service it creates per sandbox, and the subset
// of the Engine API's Service, Task and Node objects it reads back. Names and labels tie a service, its
// tasks' containers and a sandbox id together.
import { OrchestratorError } from '../errors.js';
import { sandboxObjectName } from '../names.js';
import { SANDBOX_WAIT_COMMAND } from '../sandbox-command.js';
import type { PlacementRequest } from '../types.js';

/** Every service the adapter creates carries this label, so its lists see only its own. */
export const MANAGED_BY_LABEL = 'agentfense.dev/managed-by';
export const MANAGED_BY = 'agentfense';
/** The sandbox id, on the service and on its tasks' containers (a node agent reads it locally). */
export const SANDBOX_ID_LABEL = 'agentfense.dev/sandbox-id';

const LABEL_KEY = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(\/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** What every sandbox service gets besides the request (from the adapter's options). */
export interface ServiceTemplate {
  /** Placement constraints of every sandbox service, e.g. `node.labels.agentfense.dev/node-agent==true`. */
  readonly constraints: readonly string[];
  /** Wait before Swarm starts a sandbox's container again, in ms. */
  readonly restartDelayMs: number;
  /** The most processes a sandbox container may hold. */
  readonly pidsLimit: number;
}

export interface SwarmServiceSpec {
  Name: string;
  Labels: Record<string, string>;
  TaskTemplate: {
    ContainerSpec: {
      Image: string;
      Command: string[];
      Labels: Record<string, string>;
      Hostname: string;
      CapabilityDrop: string[];
      StopGracePeriod: number;
    };
    Resources: {
      Limits: { NanoCPUs: number; MemoryBytes: number; Pids: number };
      Reservations: { NanoCPUs: number; MemoryBytes: number };
    };
    RestartPolicy: { Condition: 'any'; Delay: number; MaxAttempts: number };
    Placement: { Constraints: string[] };
  };
  Mode: { Replicated: { Replicas: 1 } };
}

export interface SwarmService {
  ID: string;
  /** The manager's version of the service: an update names it, and one made meanwhile refuses it. */
  Version?: { Index: number };
  CreatedAt?: string;
  Spec: {
    Name: string;
    Labels?: Record<string, string>;
    TaskTemplate?: {
      ContainerSpec?: { Image?: string };
      Resources?: { Reservations?: { NanoCPUs?: number; MemoryBytes?: number } };
    };
  };
}

export interface SwarmTask {
  ID: string;
  ServiceID: string;
  NodeID?: string;
  Version?: { Index: number };
  CreatedAt?: string;
  DesiredState: string;
  Status: { State: string; Message?: string; Err?: string; Timestamp?: string };
  NetworksAttachments?: { Addresses?: string[] }[];
}

export interface SwarmNode {
  ID: string;
  Spec?: { Labels?: Record<string, string>; Availability?: string };
  Description?: { Hostname?: string };
  Status: { State: string; Addr?: string; Message?: string };
}

/** The service's name for a sandbox id: `sb_<uuid>` → `sb-<uuid>` (a DNS label, as Swarm requires). */
export function serviceName(sandboxId: string): string {
  return sandboxObjectName(sandboxId);
}

function checkLabels(labels: Readonly<Record<string, string>>): void {
  for (const [key, value] of Object.entries(labels)) {
    if (!LABEL_KEY.test(key) || key.length > 253 || value.length > 63 || /[\0\n]/.test(value)) {
      throw new OrchestratorError('invalid-request', `not a label: ${key}=${value}`);
    }
    if (key === MANAGED_BY_LABEL || key === SANDBOX_ID_LABEL || key.startsWith('com.docker.')) {
      throw new OrchestratorError('invalid-request', `label ${key} is set by the adapter or by Swarm`);
    }
  }
}

function checkResources(request: PlacementRequest): void {
  const { cpuMillis, memoryBytes } = request.resources;
  if (
    !Number.isInteger(cpuMillis) ||
    cpuMillis <= 0 ||
    !Number.isSafeInteger(memoryBytes) ||
    memoryBytes < 6 * 2 ** 20
  ) {
    // Docker refuses a memory limit under 6 MiB.
    throw new OrchestratorError(
      'invalid-request',
      `resources must be a positive whole number of millicores and at least 6 MiB: ${cpuMillis} m, ${memoryBytes} B`,
    );
  }
  if (request.image === '' || /\s/.test(request.image)) {
    throw new OrchestratorError(
      'invalid-request',
      `not an image reference: ${JSON.stringify(request.image)}`,
    );
  }
}

/**
 * The one-replica service of a sandbox. What it asks for is both reserved (Swarm places it only where
 * that much is free) and its limit (it never gets more), so sandboxes on a node cannot starve each other.
 */
export function buildServiceSpec(request: PlacementRequest, template: ServiceTemplate): SwarmServiceSpec {
  const name = serviceName(request.sandboxId);
  checkLabels(request.labels ?? {});
  checkResources(request);
  const ours = { [MANAGED_BY_LABEL]: MANAGED_BY, [SANDBOX_ID_LABEL]: request.sandboxId };
  const nanoCpus = request.resources.cpuMillis * 1_000_000;
  const memory = request.resources.memoryBytes;
  return {
    Name: name,
    Labels: { ...request.labels, ...ours },
    TaskTemplate: {
      ContainerSpec: {
        Image: request.image,
        // Replaces the image's entrypoint: the container waits for its node agent to attach the view and
        // af-init, then becomes af-init; nothing of the image runs before that.
        Command: [...SANDBOX_WAIT_COMMAND],
        Labels: ours,
        Hostname: 'sandbox',
        // af-init needs no capability: the node agent mounts the view and relays exec from outside.
        CapabilityDrop: ['ALL'],
        StopGracePeriod: 10_000_000_000,
      },
      Resources: {
        Limits: { NanoCPUs: nanoCpus, MemoryBytes: memory, Pids: template.pidsLimit },
        Reservations: { NanoCPUs: nanoCpus, MemoryBytes: memory },
      },
      // Any exit is an accident (the API tier removes the service to stop a sandbox); no attempt limit,
      // so Swarm keeps placing it until it runs or is removed.
      RestartPolicy: { Condition: 'any', Delay: template.restartDelayMs * 1_000_000, MaxAttempts: 0 },
      Placement: { Constraints: [...template.constraints] },
    },
    Mode: { Replicated: { Replicas: 1 } },
  };
}

/** The sandbox id a service stands for, or `undefined` for a service that is not the adapter's. */
export function sandboxIdOfService(service: SwarmService): string | undefined {
  const labels = service.Spec.Labels ?? {};
  if (labels[MANAGED_BY_LABEL] !== MANAGED_BY) return undefined;
  const id = labels[SANDBOX_ID_LABEL];
  if (id === undefined) return undefined;
  try {
    return serviceName(id) === service.Spec.Name ? id : undefined;
  } catch {
    return undefined;
  }
}

/** A task's own address on its first network, without the prefix length; '' with no network. */
export function taskAddress(task: SwarmTask): string {
  const address = task.NetworksAttachments?.flatMap((n) => n.Addresses ?? [])[0];
  return address === undefined ? '' : (address.split('/')[0] ?? '');
}
