// What each part of deploy/kubernetes may do: the API only claims and reads pods in its namespace; the
// sandbox pod has no privilege, no token and sees the view by HostToContainer; the node agent alone is
// privileged, holds /dev/fuse and mounts with Bidirectional propagation.
import { readFileSync, readdirSync } from 'node:fs';
import { loadAll } from 'js-yaml';
import { describe, expect, it } from 'vitest';

const DEPLOY = new URL('../../../deploy/kubernetes/', import.meta.url);

type Obj = Record<string, unknown>;

/** The value at `path` inside a parsed manifest. */
function at(object: unknown, ...path: (string | number)[]): unknown {
  return path.reduce<unknown>((o, key) => (o as Record<string | number, unknown> | undefined)?.[key], object);
}

const objects = readdirSync(DEPLOY)
  .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
  .flatMap((f) => loadAll(readFileSync(new URL(f, DEPLOY), 'utf8')) as Obj[]);
const find = (kind: string, name: string): Obj =>
  objects.find((o) => o['kind'] === kind && at(o, 'metadata', 'name') === name)!;

describe('deploy/kubernetes privileges', () => {
  it("the API's role: claims (no update or patch) and read-only pods, in one namespace, nothing cluster-wide", () => {
    expect(find('Role', 'agentfense-api')['rules']).toEqual([
      {
        apiGroups: ['extensions.agents.x-k8s.io'],
        resources: ['sandboxclaims'],
        verbs: ['get', 'list', 'watch', 'create', 'delete'],
      },
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
    ]);
    expect(objects.filter((o) => /^Cluster/.test(o['kind'] as string))).toEqual([]);
  });

  it("the node agent's role reads pods and claims and writes nothing", () => {
    const verbs = (find('Role', 'agentfense-node')['rules'] as Obj[]).flatMap((r) => r['verbs'] as string[]);
    expect(new Set(verbs)).toEqual(new Set(['get', 'list', 'watch']));
  });

  it('the sandbox container is unprivileged, without a token, and sees the view by HostToContainer', () => {
    const pod = at(find('SandboxTemplate', 'agentfense-small'), 'spec', 'podTemplate', 'spec') as Obj;
    expect(pod['automountServiceAccountToken']).toBe(false);
    expect(pod['securityContext']).toMatchObject({ runAsNonRoot: true });
    const [container] = pod['containers'] as Obj[];
    expect(container!['securityContext']).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(container!['volumeMounts']).toEqual([
      { name: 'agentfense-view', mountPath: '/agentfense', mountPropagation: 'HostToContainer' },
    ]);
    expect(pod['volumes']).toEqual([{ name: 'agentfense-view', emptyDir: { sizeLimit: '16Mi' } }]);
    // Ready only once the node agent has mounted the view and written the marker.
    expect(at(container, 'readinessProbe', 'exec', 'command')).toEqual(['test', '-e', '/agentfense/ready']);
    expect(JSON.stringify(pod)).not.toMatch(/hostPath|privileged|hostNetwork|hostPID/);
  });

  it('the node agent alone is privileged, with /dev/fuse and Bidirectional propagation into kubelet pod dirs', () => {
    const pod = at(find('DaemonSet', 'agentfense-node'), 'spec', 'template', 'spec') as Obj;
    const [container] = pod['containers'] as Obj[];
    expect(container!['securityContext']).toEqual({ privileged: true });
    expect(container!['volumeMounts']).toContainEqual({
      name: 'kubelet-pods',
      mountPath: '/var/lib/kubelet/pods',
      mountPropagation: 'Bidirectional',
    });
    expect(pod['volumes']).toContainEqual({
      name: 'fuse',
      hostPath: { path: '/dev/fuse', type: 'CharDevice' },
    });
    expect(container!['readinessProbe']).toBeDefined();
    const privileged = objects.filter((o) => JSON.stringify(o).includes('"privileged":true'));
    expect(privileged.map((o) => at(o, 'metadata', 'name'))).toEqual(['agentfense-node']);
  });
});
