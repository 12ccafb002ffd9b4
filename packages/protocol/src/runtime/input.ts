// Pure validation of the caller-controlled inputs of the runtime contract (runtime.ts): cwd, env, argv,
// sandbox ids, host paths, timeouts and the destinations of a sandbox's files. Both runtimes validate with these, so they accept exactly the same
// input. Every value ends up as an argument of a wrapper (bwrap, docker), so a bad value is refused, never
// "fixed up". Runtime-specific extras (docker's line-break refusal, its limit minimums) stay in the runtime.
import { posix } from 'node:path';
import { InvalidArgumentError } from '../errors.js';

/** POSIX-portable environment variable names: the only names a runtime passes on. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Sandbox ids become cgroup directory names, container names and label values: one safe name component. */
const SANDBOX_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

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

/** Throws unless `id` can be used as one name component (cgroup and state names, container names, labels). */
export function validateSandboxId(id: string): string {
  if (!SANDBOX_ID.test(id)) {
    throw new InvalidArgumentError(
      `invalid sandbox id ${JSON.stringify(id)}: letters, digits, "_" and "-" only`,
    );
  }
  return id;
}

/** Throws unless `path` is an absolute, normalised host path; returns it without a trailing `/`. */
export function validateHostPath(path: string, what: string): string {
  if (!path.startsWith('/') || path.includes('\0') || posix.normalize(path) !== path) {
    throw new InvalidArgumentError(
      `${what} must be an absolute, normalised host path, got ${JSON.stringify(path)}`,
    );
  }
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
}

/** Throws unless `timeoutMs` (ExecOptions) is absent or a positive integer. */
export function validateTimeoutMs(timeoutMs: number | undefined): void {
  if (timeoutMs !== undefined && (!Number.isSafeInteger(timeoutMs) || timeoutMs <= 0)) {
    throw new InvalidArgumentError(`timeoutMs must be a positive integer, got ${String(timeoutMs)}`);
  }
}

/** One read-only file a sandbox is given (RuntimeStartOptions.files). */
export interface SandboxFile {
  readonly dest: string;
  readonly content: string;
}

/**
 * Throws unless every `dest` is a normalised absolute file path other than `/` (no `..`, no `//`, no
 * trailing `/`, no NUL), given once, and outside `reserved` (a runtime's own mount points: a file there
 * would hide them).
 */
export function validateSandboxFiles(
  files: readonly SandboxFile[],
  reserved: readonly string[] = [],
): readonly SandboxFile[] {
  const seen = new Set<string>();
  for (const [i, file] of files.entries()) {
    const { dest } = file;
    const normal = dest.startsWith('/') && !dest.endsWith('/') && posix.normalize(dest) === dest;
    if (!normal || dest.includes('\0')) {
      throw new InvalidArgumentError(
        `files[${i}].dest must be a normalised absolute file path (not /, no trailing /), got ${JSON.stringify(dest)}`,
      );
    }
    const clash = reserved.find((r) => dest === r || dest.startsWith(`${r}/`));
    if (clash !== undefined) {
      throw new InvalidArgumentError(
        `files[${i}].dest ${dest} is inside ${clash}, which the runtime mounts itself: choose a path outside it`,
      );
    }
    if (seen.has(dest)) throw new InvalidArgumentError(`files[${i}].dest ${dest} is given twice`);
    seen.add(dest);
    if (typeof file.content !== 'string') {
      throw new InvalidArgumentError(`files[${i}].content must be a string`);
    }
  }
  return files;
}
