// Loading a rule file (`--rules FILE.json`: a JSON array of rules, contract §7) with errors that say what to fix.
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { InvalidArgumentError, NotFoundError, validateRules } from '@agentfense/protocol/core';
import type { PermissionRule } from '@agentfense/protocol';

/**
 * Reads and validates a JSON rule file; every failure names the file (as given) and the problem. A relative
 * `file` is resolved against `cwd` (default the process's: the run helper serves another process's).
 */
export async function loadRulesFile(
  file: string,
  options: { readonly cwd?: string } = {},
): Promise<PermissionRule[]> {
  const parsed = await readJsonFile(file, { ...options, what: 'rules file' });
  if (!Array.isArray(parsed)) {
    throw new InvalidArgumentError(
      `rules file ${file} must hold a JSON array of rules like [{"pattern": "**/*", "permission": "read"}]`,
    );
  }
  try {
    return validateRules(parsed);
  } catch (err) {
    if (err instanceof InvalidArgumentError) {
      throw new InvalidArgumentError(`rules file ${file}: ${err.message}`, {
        cause: err,
        details: err.details,
      });
    }
    throw err;
  }
}

/**
 * Reads a JSON file a flag names; every failure names the file (as given, with `what`) and the problem,
 * never its contents. A relative `file` is resolved against `cwd` (default the process's).
 */
export async function readJsonFile(
  file: string,
  options: { readonly cwd?: string; readonly what: string },
): Promise<unknown> {
  const { what } = options;
  let text: string;
  try {
    text = await readFile(options.cwd === undefined ? file : resolve(options.cwd, file), 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new NotFoundError(`${what} ${file} does not exist`, { cause: err });
    throw new InvalidArgumentError(`cannot read ${what} ${file}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    // Where, not what: V8's message quotes the text around the error, and a root CLI's --rules may name
    // a file whose contents are not for its output (`--rules /etc/shadow` would print a line of it).
    throw new InvalidArgumentError(`${what} ${file} is not valid JSON${jsonErrorPlace(text, err)}`, {
      cause: err,
    });
  }
}

/** ` (line L, column C)` of a JSON.parse error when V8 gives its position ('' else), without quoting. */
function jsonErrorPlace(text: string, err: unknown): string {
  const message = err instanceof Error ? err.message : '';
  if (/end of JSON input/i.test(message)) return ' (it ends too early)';
  const at = /at position (\d+)/.exec(message)?.[1];
  if (at === undefined) return '';
  const before = text.slice(0, Number(at));
  const line = before.split('\n').length;
  return ` (line ${line}, column ${Number(at) - before.lastIndexOf('\n')})`;
}
