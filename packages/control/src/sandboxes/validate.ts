// Checks of what a caller gives to create or list sandboxes: each error names the field and what fits.
import { InvalidArgumentError } from '@agentfense/protocol';
import type { RuntimeTraits } from '@agentfense/protocol';
import { SPARE_LABEL } from './one-shot.js';

/** Longest label key / value accepted. */
const MAX_LABEL_KEY = 128;
const MAX_LABEL_VALUE = 1024;

/** The resource limits a sandbox may set. */
const RESOURCE_KEYS = new Set(['memoryBytes', 'cpuQuota', 'cpuShares', 'pidsLimit', 'diskBytes', 'tmpBytes']);

/** An image is refused by runtimes that take none rather than silently ignored. */
export function checkImage(runtime: string, traits: RuntimeTraits, image: unknown): string | null {
  if (image === undefined || image === null) return null;
  if (!traits.acceptsImage) {
    throw new InvalidArgumentError(
      `image applies to runtimes that run images, like docker (this sandbox uses ${runtime})`,
    );
  }
  if (typeof image !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$/.test(image)) {
    throw new InvalidArgumentError(
      `image must be an image reference like agentfense/base:latest, got ${JSON.stringify(image)}`,
    );
  }
  return image;
}

/** Labels: string keys of 1..128 characters, string values of at most 1024, no NUL. */
export function checkLabels(labels: unknown): Record<string, string> {
  if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) {
    throw new InvalidArgumentError('labels must be an object of string keys and string values');
  }
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels)) {
    if (key === '' || key.length > MAX_LABEL_KEY || key.includes('\0')) {
      throw new InvalidArgumentError(
        `label key ${JSON.stringify(key)} must be 1..${MAX_LABEL_KEY} characters`,
      );
    }
    if (typeof value !== 'string' || value.length > MAX_LABEL_VALUE || value.includes('\0')) {
      throw new InvalidArgumentError(
        `label ${key} must have a string value of at most ${MAX_LABEL_VALUE} characters`,
      );
    }
    out[key] = value;
  }
  return out;
}

/** Labels a caller sets on a sandbox: as checkLabels, and never the run helper's reserved key. */
export function checkUserLabels(labels: unknown): Record<string, string> {
  const out = checkLabels(labels);
  if (Object.hasOwn(out, SPARE_LABEL)) {
    throw new InvalidArgumentError(
      `label key ${SPARE_LABEL} is reserved for the run helper's spare sandboxes; use another key`,
      { details: { label: SPARE_LABEL } },
    );
  }
  return out;
}

/** Resource limits: known names, positive integers. */
export function checkResources(resources: unknown): Record<string, number> {
  if (resources === null || typeof resources !== 'object' || Array.isArray(resources)) {
    throw new InvalidArgumentError('resources must be an object');
  }
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(resources)) {
    if (!RESOURCE_KEYS.has(key))
      throw new InvalidArgumentError(`unknown resource limit ${JSON.stringify(key)}`);
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
      throw new InvalidArgumentError(`resources.${key} must be a positive integer`);
    }
    out[key] = value;
  }
  return out;
}

/** Seconds until expiry: a positive finite number, or undefined for none. */
export function checkExpiresIn(expiresIn: number | undefined): number | undefined {
  if (expiresIn === undefined) return undefined;
  if (!(typeof expiresIn === 'number' && Number.isFinite(expiresIn) && expiresIn > 0)) {
    throw new InvalidArgumentError(
      `expiresIn must be a positive number of seconds, got ${String(expiresIn)}`,
    );
  }
  return expiresIn;
}
