// A warm pool's pods are cut from one SandboxTemplate, so a claim cannot choose its image or size: the
// adapter picks, among the pools it was configured with, the smallest one that fits the request.
import { OrchestratorError } from '../errors.js';
import type { PlacementRequest } from '../types.js';

/** A SandboxWarmPool the adapter may claim from, with what its template's sandbox container gets. */
export interface WarmPool {
  /** The SandboxWarmPool's name in the adapter's namespace. */
  readonly name: string;
  /** The sandbox container's image in the pool's SandboxTemplate. */
  readonly image: string;
  /** The sandbox container's limits in the pool's SandboxTemplate. */
  readonly cpuMillis: number;
  readonly memoryBytes: number;
}

/** The smallest pool (memory, then CPU) with the request's image and at least its resources. */
export function choosePool(pools: readonly WarmPool[], request: PlacementRequest): WarmPool {
  const { cpuMillis, memoryBytes } = request.resources;
  if (!(
    cpuMillis > 0 &&
    memoryBytes > 0 &&
    Number.isSafeInteger(cpuMillis) &&
    Number.isSafeInteger(memoryBytes)
  )) {
    throw new OrchestratorError('invalid-request', 'resources need positive whole cpuMillis and memoryBytes');
  }
  const fits = pools
    .filter((p) => p.image === request.image && p.cpuMillis >= cpuMillis && p.memoryBytes >= memoryBytes)
    .sort((a, b) => a.memoryBytes - b.memoryBytes || a.cpuMillis - b.cpuMillis);
  const pool = fits[0];
  if (pool === undefined) {
    throw new OrchestratorError(
      'no-pool-fits',
      `no warm pool offers ${request.image} with ${cpuMillis}m CPU and ${memoryBytes} bytes of memory`,
    );
  }
  return pool;
}
