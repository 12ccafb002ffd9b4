// The secret options shared by `run`, `shell` and `mcp` (docs/secrets.md):
//   --secret NAME@HOST[,HOST…][:SOURCE]  SOURCE: env:VAR (default: env:NAME), file:PATH, cmd:ARGV…
//   --secret-file FILE.json              [{ name, hosts, paths?, methods?, header?, env|file|command }]
// Values are read here, in the operator's process, from the operator's environment, files or
// commands (`cmd:` words split on spaces, run without a shell); never from the agent.
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { InvalidArgumentError } from '@agentfense/protocol/core';
import { readJsonFile } from '../rules-file.js';
import { originOf } from '../secret-sources.js';
import type { SecretSource } from '../secret-sources.js';

export interface SecretFlags {
  readonly secret?: readonly string[];
  readonly secretFile?: string;
}

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

export function addSecretOptions(command: Command): Command {
  return command
    .option(
      '--secret <NAME@host[,host][:source]>',
      'a secret the sandbox may use but never read: it sees NAME=af-secret-…, which the policy point replaces with the value in HTTPS requests to the hosts; source env:VAR (default env:NAME), file:PATH or cmd:ARGV (repeatable)',
      collect,
    )
    .option(
      '--secret-file <file.json>',
      'secrets as a JSON array of { name, hosts, paths?, methods?, header?, env | file | command }',
    );
}

/** Parses one `--secret` value into its binding and source. */
export function parseSecretFlag(value: string, cwd: string): SecretSource {
  const at = value.indexOf('@');
  const name = at === -1 ? value : value.slice(0, at);
  if (at <= 0) {
    throw new InvalidArgumentError(
      `--secret ${name}: give the hosts it may be sent to, e.g. --secret ${name || 'NAME'}@api.example.com`,
    );
  }
  const rest = value.slice(at + 1);
  const colon = rest.indexOf(':');
  const hosts = (colon === -1 ? rest : rest.slice(0, colon)).split(',').filter((h) => h !== '');
  const source = colon === -1 ? `env:${name}` : rest.slice(colon + 1);
  const [kind = '', ...more] = source.split(':');
  const arg = more.join(':');
  if (kind === 'env' && arg !== '') return { name, hosts, env: arg };
  if (kind === 'file' && arg !== '') return { name, hosts, file: resolve(cwd, arg) };
  if (kind === 'cmd' && arg.trim() !== '') return { name, hosts, command: arg.trim().split(/\s+/) };
  throw new InvalidArgumentError(
    `--secret ${name}: the source after the hosts must be env:VAR, file:PATH or cmd:PROGRAM ARGS (got ${JSON.stringify(kind)})`,
  );
}

function fromFileEntry(raw: unknown, index: number, cwd: string): SecretSource {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new InvalidArgumentError(`--secret-file: entry ${index} must be an object`);
  }
  const entry = raw as Record<string, unknown>;
  if ('value' in entry) {
    throw new InvalidArgumentError(
      `--secret-file: entry ${index} holds a value: give env, file or command instead (the file must not hold secrets itself)`,
    );
  }
  // The binding is checked by the control plane; the source here.
  const file = entry['file'];
  return (typeof file === 'string'
    ? { ...entry, file: resolve(cwd, file) }
    : entry) as unknown as SecretSource;
}

/**
 * The secrets the flags declare, with their sources: the control plane reads each value at create and
 * keeps the source (never the value) so a later start in another process reads it again.
 */
export async function secretsFromFlags(
  flags: SecretFlags,
  options: { cwd: string },
): Promise<SecretSource[]> {
  const sources = (flags.secret ?? []).map((v) => parseSecretFlag(v, options.cwd));
  if (flags.secretFile !== undefined) {
    const list = await readJsonFile(flags.secretFile, { cwd: options.cwd, what: '--secret-file' });
    if (!Array.isArray(list))
      throw new InvalidArgumentError('--secret-file: expected a JSON array of secrets');
    sources.push(...list.map((raw, i) => fromFileEntry(raw, i, options.cwd)));
  }
  // Checked now (exactly one source each), before anything is created.
  for (const source of sources) originOf(source);
  return sources;
}
