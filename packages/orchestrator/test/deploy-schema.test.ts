// deploy/kubernetes and every object the adapter sends or reads, validated against agent-sandbox's CRD
// schemas (pinned in crds/agent-sandbox) and Kubernetes' OpenAPI; a misspelt field or a wrong value fails.
import { readFileSync, readdirSync } from 'node:fs';
import { load, loadAll } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { buildClaim } from '../src/kubernetes/index.js';
import { CRD_KINDS, validateObject } from './schemas.js';
import { fixture } from './replay.js';
import { CLAIMS_PATH, IMAGE, POOLS, SANDBOX, replayAdapter } from './setup.js';

const DEPLOY = new URL('../../../deploy/kubernetes/', import.meta.url);

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [field: string]: unknown;
}

function manifests(): { file: string; object: Manifest }[] {
  return readdirSync(DEPLOY)
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .flatMap((file) =>
      (loadAll(readFileSync(new URL(file, DEPLOY), 'utf8')) as Manifest[]).map((object) => ({
        file,
        object,
      })),
    );
}

/** A deep copy of `object` with `change` applied to it. */
function altered<T>(object: T, change: (copy: T) => void): T {
  const copy = structuredClone(object);
  change(copy);
  return copy;
}

describe('deploy/kubernetes', () => {
  const all = manifests();

  it('pins the agent-sandbox CRDs the deploy files and the adapter use', () => {
    expect(CRD_KINDS).toEqual(
      expect.arrayContaining([
        'extensions.agents.x-k8s.io/v1beta1/SandboxClaim',
        'extensions.agents.x-k8s.io/v1beta1/SandboxTemplate',
        'extensions.agents.x-k8s.io/v1beta1/SandboxWarmPool',
      ]),
    );
  });

  it('every object in every file is valid for its kind', () => {
    const kinds = all.map(({ object }) => object.kind).sort();
    expect(kinds).toEqual([
      'DaemonSet',
      'Deployment',
      'Namespace',
      'NetworkPolicy',
      'Role',
      'Role',
      'RoleBinding',
      'RoleBinding',
      'SandboxTemplate',
      'SandboxWarmPool',
      'Service',
      'ServiceAccount',
      'ServiceAccount',
    ]);
    for (const { file, object } of all) {
      expect({ file, kind: object.kind, errors: validateObject(object) }).toEqual({
        file,
        kind: object.kind,
        errors: [],
      });
    }
  });

  it('a misspelt field or a wrong value in any kind fails validation', () => {
    const find = (kind: string): Manifest => all.find(({ object }) => object.kind === kind)!.object;
    type PodTemplate = { spec: { containers: { volumeMounts: Record<string, unknown>[] }[] } };
    const template = find('SandboxTemplate') as Manifest & { spec: { podTemplate: PodTemplate } };
    const daemonSet = find('DaemonSet') as Manifest & { spec: { template: PodTemplate } };
    const role = find('Role') as Manifest & { rules: Record<string, unknown>[] };
    const wrong = [
      // A typo inside the pod that agent-sandbox's CRD embeds.
      altered(template, (t) => {
        const mount = t.spec.podTemplate.spec.containers[0]!.volumeMounts[0]!;
        mount['mountPropogation'] = mount['mountPropagation'];
        delete mount['mountPropagation'];
      }),
      // A value the CRD's enum does not allow.
      altered(
        template,
        (t) => (t.spec.podTemplate.spec.containers[0]!.volumeMounts[0]!['mountPropagation'] = 'Bidi'),
      ),
      altered(
        find('SandboxWarmPool'),
        (p) => ((p as unknown as { spec: Record<string, unknown> }).spec['replica'] = 2),
      ),
      // Core kinds: an unknown field, and a wrong type.
      altered(
        daemonSet,
        (d) => (d.spec.template.spec.containers[0]!.volumeMounts[1]!['propagation'] = 'Bidirectional'),
      ),
      altered(
        daemonSet,
        (d) => (d.spec.template.spec.containers[0]!.volumeMounts[1]!['mountPropagation'] = 2),
      ),
      altered(role, (r) => (r.rules[0]!['verb'] = ['get'])),
    ];
    expect(wrong.map((object) => validateObject(object).length > 0)).toEqual(wrong.map(() => true));
  });

  it('kustomization.yaml lists every file of the folder', () => {
    const kustomization = load(readFileSync(new URL('kustomization.yaml', DEPLOY), 'utf8')) as {
      resources: string[];
      namespace: string;
    };
    const files = readdirSync(DEPLOY).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
    expect([...kustomization.resources].sort()).toEqual(files.sort());
    for (const { object } of all) {
      if (object.kind !== 'Namespace') expect(object.metadata.namespace).toBe(kustomization.namespace);
    }
  });
});

describe('objects the adapter sends and reads', () => {
  it('every claim the adapter would create, on every pool, is a valid SandboxClaim', () => {
    for (const pool of POOLS) {
      const claim = buildClaim(
        {
          sandboxId: SANDBOX,
          image: IMAGE,
          resources: { cpuMillis: 1, memoryBytes: 1 },
          labels: { 'example.com/team': 'a_b.c' },
        },
        pool,
        'agentfense',
      );
      expect(validateObject(claim)).toEqual([]);
    }
  });

  it('the body the adapter POSTs is a valid SandboxClaim', async () => {
    const { server, adapter } = await replayAdapter([
      { method: 'POST', path: CLAIMS_PATH, status: 201, body: fixture('claim-created.json') },
    ]);
    try {
      await adapter.place({
        sandboxId: SANDBOX,
        image: IMAGE,
        resources: { cpuMillis: 1000, memoryBytes: 2 ** 30 },
      });
      expect(server.requests.map((q) => validateObject(q.body))).toEqual([[]]);
    } finally {
      await server.close();
    }
  });

  it('the recorded responses are valid objects of their kinds', () => {
    const objects: unknown[] = [];
    // The Kubernetes recordings only: the Swarm ones live in fixtures/swarm/.
    const files = readdirSync(new URL('./fixtures/', import.meta.url)).filter((f) => f.endsWith('.json'));
    for (const file of files) {
      const data = fixture<{ kind?: string; items?: unknown[] } | { type: string; object: unknown }[]>(file);
      // A bookmark carries only a resourceVersion, by design.
      if (Array.isArray(data))
        objects.push(...data.filter((e) => e.type !== 'BOOKMARK').map((e) => e.object));
      else if (Array.isArray(data.items)) objects.push(...data.items);
      else objects.push(data);
    }
    const checked = objects.filter((o) => ['SandboxClaim', 'Pod'].includes((o as { kind: string }).kind));
    expect(checked.length).toBeGreaterThan(20);
    for (const object of checked) expect(validateObject(object)).toEqual([]);
  });
});
