// Validation of client-supplied file paths inside a codebase (uploads, downloads, listings): relative,
// normalised, and free of anything that could leave the codebase directory or confuse a path join.
import { InvalidArgumentError } from '@agentfense/protocol';

/** Longest accepted path (bytes), like PATH_MAX. */
export const MAX_PATH_BYTES = 4096;
/** Longest accepted path component (bytes), like NAME_MAX. */
export const MAX_NAME_BYTES = 255;

/**
 * Splits a relative codebase path (`src/app.ts`) into its components, or throws InvalidArgumentError
 * saying what is wrong: absolute, empty, an empty component (`a//b`, a trailing `/`), `.` or `..`, a NUL
 * byte, or too long. `allowRoot` accepts the empty string as the codebase root (listings).
 */
export function splitCodebasePath(path: unknown, options: { allowRoot?: boolean } = {}): string[] {
  if (typeof path !== 'string') throw new InvalidArgumentError('a file path must be a string');
  const shown = JSON.stringify(path.slice(0, 200));
  if (path === '') {
    if (options.allowRoot === true) return [];
    throw new InvalidArgumentError('a file path must not be empty');
  }
  if (path.includes('\0')) throw new InvalidArgumentError(`file path ${shown} contains a NUL byte`);
  if (path.startsWith('/')) {
    throw new InvalidArgumentError(
      `file path ${shown} must be relative to the codebase root (no leading "/")`,
    );
  }
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) {
    throw new InvalidArgumentError(`file path ${shown} is longer than ${MAX_PATH_BYTES} bytes`);
  }
  const segments = path.split('/');
  for (const segment of segments) {
    if (segment === '') {
      throw new InvalidArgumentError(`file path ${shown} has an empty component ("//" or a trailing "/")`);
    }
    if (segment === '.' || segment === '..') {
      throw new InvalidArgumentError(`file path ${shown} must not contain "." or ".." components`);
    }
    if (Buffer.byteLength(segment) > MAX_NAME_BYTES) {
      throw new InvalidArgumentError(
        `file path ${shown} has a component longer than ${MAX_NAME_BYTES} bytes`,
      );
    }
  }
  return segments;
}
