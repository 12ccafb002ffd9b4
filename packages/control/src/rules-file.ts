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
  let text: string;
  try {
    text = await readFile(options.cwd === undefined ? file : resolve(options.cwd, file), 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new NotFoundError(`rules file ${file} does not exist`, { cause: err });
    throw new InvalidArgumentError(`cannot read rules file ${file}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new InvalidArgumentError(`rules file ${file} is not valid JSON: ${(err as Error).message}`, {
      cause: err,
    });
  }
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
