// Builds the Kubernetes adapter against a ReplayServer, as the API tier would against a cluster.
import { KubernetesOrchestrator, kubeApiFrom, type WarmPool } from '../src/kubernetes/index.js';
import { ReplayServer, type Exchange } from './replay.js';

export const SANDBOX = 'sb_3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b0c';
export const CLAIM = 'sb-3f2a9c1e-7b4d-4e8a-9c0f-5d6e7f8a9b0c';
export const CLAIMS_PATH = '/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/agentfense/sandboxclaims';
export const PODS_PATH = '/api/v1/namespaces/agentfense/pods';
export const IMAGE = 'ghcr.io/agentfense/sandbox:0.1.0';

export const POOLS: WarmPool[] = [
  { name: 'agentfense-large', image: IMAGE, cpuMillis: 4000, memoryBytes: 8 * 2 ** 30 },
  { name: 'agentfense-small', image: IMAGE, cpuMillis: 1000, memoryBytes: 2 ** 30 },
];

export async function replayAdapter(
  exchanges: readonly Exchange[],
): Promise<{ server: ReplayServer; adapter: KubernetesOrchestrator; errors: unknown[] }> {
  const server = new ReplayServer(exchanges);
  const config = await server.start();
  const errors: unknown[] = [];
  const adapter = new KubernetesOrchestrator({
    api: kubeApiFrom(config),
    namespace: 'agentfense',
    pools: POOLS,
    nodeAgent: {
      namespace: 'agentfense',
      daemonSet: 'agentfense-node',
      labelSelector: 'app.kubernetes.io/component=node-agent',
      port: 7300,
    },
    onError: (error) => errors.push(error),
    retryDelayMs: 10,
  });
  return { server, adapter, errors };
}
