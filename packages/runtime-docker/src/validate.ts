// Docker's own input checks, on top of the rules both runtimes share (@agentfense/protocol's
// runtime/input.ts: cwd, env, argv, sandbox ids, host paths): host paths docker's `--mount` can take, and
// the resource limits docker accepts. Everything here ends up as a docker argument, so a bad value must be
// refused, never "fixed up".
import type { ResourceLimits } from '@agentfense/protocol';
import { InvalidArgumentError, validateHostPath as validateAnyHostPath } from '@agentfense/protocol';

/** Docker's own minimum for `--memory` (it refuses less than 6 MiB). */
export const MIN_MEMORY_BYTES = 6 * 1024 * 1024;
/** Docker's minimum CFS quota (1 ms per period) and cpu.shares (2). */
export const MIN_CPU_QUOTA = 1_000;
export const MIN_CPU_SHARES = 2;

/** Throws unless `path` is an absolute, normalised host path without characters docker's --mount cannot take. */
export function validateHostPath(path: string, what: string): string {
  const valid = validateAnyHostPath(path, what);
  // `--mount` is a CSV field list: we quote the source, but a newline cannot be quoted reliably.
  if (/[\n\r]/.test(path)) {
    throw new InvalidArgumentError(`${what} must not contain line breaks, got ${JSON.stringify(path)}`);
  }
  return valid;
}

/** Throws unless every requested limit is an integer docker accepts. */
export function validateLimits(limits: ResourceLimits): void {
  const check = (name: keyof ResourceLimits, min: number): void => {
    const value = limits[name];
    if (value === undefined) return;
    if (!Number.isSafeInteger(value) || value < min) {
      throw new InvalidArgumentError(
        `resources.${name} must be an integer of at least ${min}, got ${String(value)}`,
      );
    }
  };
  check('memoryBytes', MIN_MEMORY_BYTES);
  check('cpuQuota', MIN_CPU_QUOTA);
  check('cpuShares', MIN_CPU_SHARES);
  check('pidsLimit', 1);
}

/** Image references as docker accepts them; never starting with `-` (it would read as an option). */
export const IMAGE_REFERENCE = /^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}$/;

/** Refuses image references docker would not take, or that could be read as an option. */
export function validateImage(image: string): string {
  if (!IMAGE_REFERENCE.test(image)) {
    throw new InvalidArgumentError(`invalid image reference ${JSON.stringify(image)}`);
  }
  return image;
}
