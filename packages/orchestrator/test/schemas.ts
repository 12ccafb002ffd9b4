// Validation of Kubernetes objects without a cluster, as strict as `kubectl apply` with server-side
// field validation: agent-sandbox's custom resources against the openAPIV3Schema of its CRDs (pinned in
// crds/agent-sandbox), core objects against Kubernetes' OpenAPI twice over: kubernetes-models checks
// types, enums and required fields; @kubernetes/client-node's generated models (from the same OpenAPI)
// name every field each type has, so an unknown or misspelt field is an error too.
import { readFileSync, readdirSync } from 'node:fs';
import * as k8s from '@kubernetes/client-node';
import { Ajv, type ValidateFunction } from 'ajv';
import { load } from 'js-yaml';
import { Namespace, Pod, Service, ServiceAccount } from 'kubernetes-models/v1';
import { DaemonSet, Deployment } from 'kubernetes-models/apps/v1';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';

const CRDS = new URL('./crds/agent-sandbox/', import.meta.url);

type Schema = Record<string, unknown>;

/** Unknown fields are errors wherever the schema lists the fields (the API server prunes or refuses them). */
function strict(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(strict);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: Schema = {};
  for (const [key, value] of Object.entries(schema)) out[key] = strict(value);
  if (out['properties'] !== undefined && out['additionalProperties'] === undefined) {
    if (out['x-kubernetes-preserve-unknown-fields'] !== true) out['additionalProperties'] = false;
  }
  return out;
}

interface CrdVersion {
  name: string;
  schema: { openAPIV3Schema: Schema };
}
interface Crd {
  spec: { group: string; names: { kind: string }; versions: CrdVersion[] };
}

const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
const crdValidators = new Map<string, ValidateFunction>();
for (const file of readdirSync(CRDS).filter((f) => f.endsWith('.yaml'))) {
  const crd = load(readFileSync(new URL(file, CRDS), 'utf8')) as Crd;
  for (const version of crd.spec.versions) {
    const key = `${crd.spec.group}/${version.name}/${crd.spec.names.kind}`;
    crdValidators.set(key, ajv.compile(strict(version.schema.openAPIV3Schema) as Schema));
  }
}

/** The custom resource kinds the pinned CRDs define, as `group/version/Kind`. */
export const CRD_KINDS = [...crdValidators.keys()];

interface Validating {
  validate(): void;
}
type ModelClass = new (data: never) => Validating;

/** The core kinds deploy/kubernetes uses: kubernetes-models' class and client-node's model name. */
const CORE: Record<string, [ModelClass, string]> = {
  'v1/Namespace': [Namespace, 'V1Namespace'],
  'v1/ServiceAccount': [ServiceAccount, 'V1ServiceAccount'],
  'v1/Service': [Service, 'V1Service'],
  'v1/Pod': [Pod, 'V1Pod'],
  'apps/v1/Deployment': [Deployment, 'V1Deployment'],
  'apps/v1/DaemonSet': [DaemonSet, 'V1DaemonSet'],
  'networking.k8s.io/v1/NetworkPolicy': [NetworkPolicy, 'V1NetworkPolicy'],
  'rbac.authorization.k8s.io/v1/Role': [Role, 'V1Role'],
  'rbac.authorization.k8s.io/v1/RoleBinding': [RoleBinding, 'V1RoleBinding'],
};

interface Attribute {
  baseName: string;
  type: string;
}
type Model = { getAttributeTypeMap(): Attribute[] };
const models = k8s as unknown as Record<string, Model | undefined>;

/** Fields not in Kubernetes' OpenAPI for `type`, as JSON paths. */
export function unknownFields(value: unknown, type: string, path = ''): string[] {
  if (value === null || value === undefined) return [];
  const array = /^Array<(.+)>$/.exec(type);
  if (array !== null) {
    return Array.isArray(value) ? value.flatMap((v, i) => unknownFields(v, array[1]!, `${path}[${i}]`)) : [];
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map !== null) {
    return Object.entries(value).flatMap(([k, v]) => unknownFields(v, map[1]!, `${path}.${k}`));
  }
  const model = models[type];
  if (model?.getAttributeTypeMap === undefined || typeof value !== 'object') return [];
  const attributes = model.getAttributeTypeMap();
  return Object.entries(value).flatMap(([key, v]) => {
    const attribute = attributes.find((a) => a.baseName === key);
    return attribute === undefined
      ? [`${path}.${key}: unknown field`]
      : unknownFields(v, attribute.type, `${path}.${key}`);
  });
}

/**
 * A SandboxTemplate's pod, checked as a core Pod too: the CRD embeds the PodSpec's structure but not the
 * enums Kubernetes' OpenAPI gives (mountPropagation, restartPolicy, ...).
 */
function embeddedPod(object: unknown): string[] {
  const template = (
    object as { kind?: string; spec?: { podTemplate?: { metadata?: unknown; spec?: unknown } } }
  ).spec?.podTemplate;
  if ((object as { kind?: string }).kind !== 'SandboxTemplate' || template === undefined) return [];
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: template.metadata, spec: template.spec };
  return validateObject(pod).map((e) => `.spec.podTemplate: ${e}`);
}

interface TypeMeta {
  apiVersion?: string;
  kind?: string;
  metadata?: unknown;
}

/** Every way `object` departs from its kind's schema; empty when it is valid. */
export function validateObject(object: unknown): string[] {
  const { apiVersion, kind, metadata } = (object ?? {}) as TypeMeta;
  const key = `${apiVersion}/${kind}`;
  const crd = crdValidators.get(key);
  if (crd !== undefined) {
    const errors = crd(object)
      ? []
      : (crd.errors ?? []).map((e) => `${e.instancePath} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
    return [...errors, ...unknownFields(metadata, 'V1ObjectMeta', '.metadata'), ...embeddedPod(object)];
  }
  const core = CORE[key];
  if (core === undefined) return [`no schema for ${key}`];
  const [ModelClass, modelName] = core;
  const errors: string[] = [];
  try {
    new ModelClass(object as never).validate();
  } catch (error) {
    errors.push((error as Error).message);
  }
  return [...errors, ...unknownFields(object, modelName)];
}
