// Pure validation of the caller-controlled parts of a docker command line (cwd, env, argv, ids, limits).
// Everything here ends up as a docker argument, so a bad value must be refused, never "fixed up".
// (cwd/env/command/id rules are the same as runtime-bwrap's: both runtimes accept exactly the same input.)
import { posix } from 'node:path';
import type { ResourceLimits } from '@agentfense/protocol';
import { InvalidArgumentError } from '@agentfense/protocol';

/** POSIX-portable environment variable names: the only names we pass to `--env`. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Sandbox ids become container names: one safe name component, nothing else. */
const SANDBOX_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

/** Docker's own minimum for `--memory` (it refuses less than 6 MiB). */
export const MIN_MEMORY_BYTES = 6 * 1024 * 1024;
/** Docker's minimum CFS quota (1 ms per period) and cpu.shares (2). */
export const MIN_CPU_QUOTA = 1_000;
export const MIN_CPU_SHARES = 2;

/** Throws unless `cwd` is an absolute, normalised path inside the sandbox (no `..`, no `//`, no trailing `/`). */
export function validateCwd(cwd: string): string {
  if (cwd.length === 0 || !cwd.startsWith('/')) {
    throw new InvalidArgumentError(
      `cwd must be an absolute path inside the sandbox, got ${JSON.stringify(cwd)}`,
    );
  }
  if (cwd.includes('\0') || posix.normalize(cwd) !== cwd || (cwd.length > 1 && cwd.endsWith('/'))) {
    throw new InvalidArgumentError(
      `cwd must be a normalised path (no "..", "." or repeated "/"), got ${JSON.stringify(cwd)}`,
    );
  }
  return cwd;
}

/** Throws unless every name is a valid variable name and no name or value holds a NUL byte. */
export function validateEnv(env: Readonly<Record<string, string>>): Readonly<Record<string, string>> {
  for (const [name, value] of Object.entries(env)) {
    if (!ENV_NAME.test(name)) {
      throw new InvalidArgumentError(`invalid environment variable name ${JSON.stringify(name)}`);
    }
    if (typeof value !== 'string' || value.includes('\0')) {
      throw new InvalidArgumentError(`environment variable ${name} must be a string without NUL bytes`);
    }
  }
  return env;
}

/** Throws unless the command is a non-empty string or a non-empty argv without NUL bytes. */
export function validateCommand(command: string | readonly string[]): void {
  const parts = typeof command === 'string' ? [command] : command;
  if (parts.length === 0 || parts[0] === '') {
    throw new InvalidArgumentError('command must be a non-empty string or a non-empty argv array');
  }
  for (const part of parts) {
    if (typeof part !== 'string' || part.includes('\0')) {
      throw new InvalidArgumentError('command arguments must be strings without NUL bytes');
    }
  }
}

/** Throws unless `id` can be used inside a container name and a label value. */
export function validateSandboxId(id: string): string {
  if (!SANDBOX_ID.test(id)) {
    throw new InvalidArgumentError(
      `invalid sandbox id ${JSON.stringify(id)}: letters, digits, "_" and "-" only`,
    );
  }
  return id;
}

/** Throws unless `path` is an absolute, normalised host path without characters docker's --mount cannot take. */
export function validateHostPath(path: string, what: string): string {
  if (!path.startsWith('/') || path.includes('\0') || posix.normalize(path) !== path) {
    throw new InvalidArgumentError(
      `${what} must be an absolute, normalised host path, got ${JSON.stringify(path)}`,
    );
  }
  // `--mount` is a CSV field list: we quote the source, but a newline cannot be quoted reliably.
  if (/[\n\r]/.test(path)) {
    throw new InvalidArgumentError(`${what} must not contain line breaks, got ${JSON.stringify(path)}`);
  }
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
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
