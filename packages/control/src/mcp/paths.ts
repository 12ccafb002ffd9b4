// Paths as a model gives them to the file tools: relative to the codebase root, or absolute under
// /workspace (where `run` and `shell` see the codebase). Anything that would leave the codebase is refused
// with a message saying what to pass instead, never silently clamped to the root.
import { InvalidArgumentError } from '@agentfense/protocol';

/** Where the codebase is mounted inside the sandbox. */
export const WORKSPACE = '/workspace';

const HOW = `pass a path relative to the codebase root (e.g. "src/app.py") or an absolute path under ${WORKSPACE}`;

/** `src/a.ts`, `./src/a.ts`, `/workspace/src/a.ts` → `/src/a.ts`; the root is `/`. */
export function toCodebasePath(input: string, argument = 'path'): string {
  if (input.includes('\0')) throw new InvalidArgumentError(`${argument} contains a NUL byte; ${HOW}`);
  let rest = input.trim() === '' ? '.' : input;
  if (rest.startsWith('/')) {
    if (rest !== WORKSPACE && !rest.startsWith(`${WORKSPACE}/`)) {
      throw new InvalidArgumentError(`${argument} ${JSON.stringify(input)} is outside the codebase; ${HOW}`);
    }
    rest = rest.slice(WORKSPACE.length);
  }
  const segments: string[] = [];
  for (const segment of rest.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (segments.length === 0) {
        throw new InvalidArgumentError(
          `${argument} ${JSON.stringify(input)} climbs out of the codebase with ".."; ${HOW}`,
        );
      }
      segments.pop();
      continue;
    }
    segments.push(segment);
  }
  return `/${segments.join('/')}`;
}

/** The path inside the sandbox of a codebase path (`/src/a.ts` → `/workspace/src/a.ts`). */
export function sandboxPath(codebasePath: string): string {
  return codebasePath === '/' ? WORKSPACE : `${WORKSPACE}${codebasePath}`;
}

/** A `cwd` for a command: relative paths start at /workspace; absolute ones are the sandbox's own. */
export function commandCwd(input: string | undefined): string | undefined {
  if (input === undefined) return undefined;
  if (input.includes('\0')) throw new InvalidArgumentError('cwd contains a NUL byte');
  if (input.startsWith('/')) return input;
  return sandboxPath(toCodebasePath(input, 'cwd'));
}
