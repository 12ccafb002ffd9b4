// Where an operator's secret values come from: given directly, an environment variable of this
// process, a file, or a command (a keychain or vault CLI, run as an argv without a shell). Read in the
// process of the control plane the operator opened (library, CLI), at create, and again from the kept
// source by a process that starts the sandbox without holding the value; never from the agent, and
// never named over the HTTP or gRPC API, whose callers may only give values (docs/secrets.md). Errors
// name the secret and its source, never a value or a command's output.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { InvalidArgumentError } from '@agentfense/protocol';
import { markNotDumpable } from '@agentfense/network';
import type { SecretBinding, SecretInput } from '@agentfense/network';
import type { SecretOrigin } from './sandboxes/types.js';

/** A secret as an operator declares it: its binding and exactly one source of its value. */
export type SecretSource = SecretBinding &
  (
    | { readonly value: string }
    | { readonly env: string }
    | { readonly file: string }
    | { readonly command: readonly string[] }
  );

const COMMAND_TIMEOUT_MS = 30_000;

/** One trailing newline (a file's or a command's) is not part of the value. */
function chomp(text: string): string {
  return text.replace(/\r?\n$/, '');
}

function runCommand(name: string, argv: readonly string[]): Promise<string> {
  const [file, ...args] = argv;
  if (file === undefined || file === '') {
    return Promise.reject(new InvalidArgumentError(`secret ${name}: \`command\` must be a non-empty argv`));
  }
  return new Promise((resolve, reject) => {
    // The command's output is the value: never logged, never in an error.
    execFile(
      file,
      args,
      { timeout: COMMAND_TIMEOUT_MS, maxBuffer: 64 * 1024, encoding: 'utf8' },
      (err, stdout) => {
        if (err === null) resolve(stdout);
        else {
          const code = (err as NodeJS.ErrnoException & { code?: unknown }).code;
          reject(
            new InvalidArgumentError(
              `secret ${name}: the command ${file} failed (${String(code ?? err.name)})`,
            ),
          );
        }
      },
    );
  });
}

const SOURCES = ['value', 'env', 'file', 'command'] as const;

/**
 * Where `source` reads its value, to be kept with the sandbox (a file by its absolute path); null for a
 * value given as it is, which is never kept. Refuses a secret with no source or more than one.
 */
export function originOf(source: SecretSource): SecretOrigin | null {
  const given = SOURCES.filter((k) => k in source);
  const name = String((source as { name?: unknown }).name);
  if (given.length !== 1) {
    throw new InvalidArgumentError(
      `secret ${name}: give exactly one of value, env, file, command (got ${given.join(', ') || 'none'})`,
    );
  }
  if ('value' in source) return null;
  if ('env' in source && typeof source.env === 'string' && source.env !== '') return { env: source.env };
  if ('file' in source && typeof source.file === 'string' && source.file !== '')
    return { file: resolve(source.file) };
  if (
    'command' in source &&
    Array.isArray(source.command) &&
    source.command.every((a) => typeof a === 'string')
  )
    return { command: [...source.command] };
  throw new InvalidArgumentError(
    `secret ${name}: \`${given[0] ?? ''}\` must be a non-empty string (env, file) or an argv (command)`,
  );
}

async function valueOf(source: SecretSource): Promise<string> {
  const { name } = source;
  if ('value' in source) return source.value;
  if ('env' in source) {
    const value = process.env[source.env];
    if (value === undefined || value === '') {
      throw new InvalidArgumentError(`secret ${name}: the environment variable ${source.env} is not set`);
    }
    return value;
  }
  if ('file' in source) {
    try {
      return chomp(await readFile(source.file, 'utf8'));
    } catch (err) {
      throw new InvalidArgumentError(
        `secret ${name}: cannot read ${source.file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  }
  if ('command' in source) return chomp(await runCommand(name, source.command));
  throw new InvalidArgumentError(`secret ${String(name)}: give one of value, env, file, command`);
}

/** Reads every secret's value from its source; the bindings are checked by the control plane. */
export async function resolveSecrets(sources: readonly SecretSource[] | undefined): Promise<SecretInput[]> {
  const out: SecretInput[] = [];
  // Before the first value is read: no core dump of this process, its /proc closed to other uids.
  if ((sources ?? []).length > 0) markNotDumpable();
  for (const source of sources ?? []) {
    originOf(source); // exactly one source, of the right type
    const { name, hosts, paths, methods, header } = source;
    out.push({
      name,
      hosts,
      ...(paths === undefined ? {} : { paths }),
      ...(methods === undefined ? {} : { methods }),
      ...(header === undefined ? {} : { header }),
      value: await valueOf(source),
    });
  }
  return out;
}
