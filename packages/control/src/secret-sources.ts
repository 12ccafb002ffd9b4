// Where an operator's secret values come from: given directly, an environment variable of this
// process, a file, or a command (a keychain or vault CLI, run as an argv without a shell). Resolved in
// the operator's process (library, CLI) before the control plane sees them; never from the agent, and
// never over the HTTP or gRPC API, whose callers may only give values (docs/secrets.md). Errors name
// the secret and its source, never a value or a command's output.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { InvalidArgumentError } from '@agentfense/protocol';
import { markNotDumpable } from '@agentfense/network';
import type { SecretBinding, SecretInput } from '@agentfense/network';

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
