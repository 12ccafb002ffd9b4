// `agentfense sandbox secret sb_… NAME [--from env:VAR|file:PATH|command:ARGV] [--server URL]`: gives a
// declared secret of an existing sandbox its value (docs/secrets.md). The value is read by this process
// (standard input by default) and never printed. With --server it goes to the `serve` that runs the
// sandbox as a value; without, this process's control plane records the source (env, file, command),
// which the start that follows reads again. A value from standard input needs --server: it would live
// only in this process, which ends with the command.
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { InvalidArgumentError } from '@agentfense/protocol/core';
import type { SecretValueSource } from '../../sandboxes/secret-values.js';
import { resolveSecrets } from '../../secret-sources.js';
import { addDataOption, withControlPlane } from '../control-options.js';
import type { DataFlags } from '../control-options.js';
import type { CliContext } from '../io.js';
import { ServerClient, addServerOptions } from '../server-client.js';
import type { ServerFlags } from '../server-client.js';

type SecretFlags = DataFlags & ServerFlags & { readonly from?: string };

/** `--from` parsed; absent: the value comes from standard input. */
export function parseFrom(from: string | undefined, cwd: string): SecretValueSource | undefined {
  if (from === undefined) return undefined;
  const colon = from.indexOf(':');
  const kind = colon === -1 ? from : from.slice(0, colon);
  const arg = colon === -1 ? '' : from.slice(colon + 1);
  if (kind === 'env' && arg !== '') return { env: arg };
  if (kind === 'file' && arg !== '') return { file: resolve(cwd, arg) };
  if ((kind === 'command' || kind === 'cmd') && arg.trim() !== '')
    return { command: arg.trim().split(/\s+/) };
  throw new InvalidArgumentError(
    `--from ${JSON.stringify(kind)}: expected env:VAR, file:PATH or command:PROGRAM ARGS (words split on spaces, run without a shell); without --from the value is read from standard input`,
  );
}

async function readStdin(): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of process.stdin) parts.push(chunk as Buffer);
  // One trailing newline (echo, a heredoc) is not part of the value, as for a file or a command.
  return Buffer.concat(parts)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

/** The value itself, read here as a control plane would read it: sent to a server, which takes values only. */
async function readValue(name: string, source: SecretValueSource | undefined): Promise<string> {
  if (source === undefined) return readStdin();
  // The hosts are the sandbox's, checked by the server; the source is read with the same rules and errors.
  const [read] = await resolveSecrets([{ name, hosts: [], ...source }]);
  return read?.value ?? '';
}

export function registerSecretCommand(sandbox: Command, context: CliContext): void {
  const { io } = context;
  addDataOption(
    addServerOptions(
      sandbox
        .command('secret')
        .description(
          "give (or replace) the value of one of a sandbox's declared secrets, running or not; the value is read from standard input unless --from names its source, and is never printed",
        )
        .argument('<id>', 'sandbox id')
        .argument('<name>', 'the name the secret was declared with (--secret NAME@HOST)'),
    ),
  )
    .option(
      '--from <source>',
      'env:VAR, file:PATH or command:PROGRAM ARGS, read by this process (default: standard input)',
    )
    .action(async (id: string, name: string, flags: SecretFlags) => {
      const source = parseFrom(flags.from, process.cwd());
      if (flags.server !== undefined || flags.tokenFile !== undefined) {
        const value = await readValue(name, source);
        const client = await ServerClient.fromFlags(flags);
        await client.call(
          'PUT',
          `/v1/sandboxes/${encodeURIComponent(id)}/secrets/${encodeURIComponent(name)}`,
          { value },
        );
      } else {
        if (source === undefined) {
          throw new InvalidArgumentError(
            `secret ${name}: a value read from standard input would live only in this process, which ends now; send it to the agentfense serve that runs the sandbox (--server URL), or name a source a later start reads again (--from env:VAR, file:PATH or command:ARGV)`,
          );
        }
        await withControlPlane(flags, (plane) => plane.setSecret(id, name, source));
      }
      io.stdout.write(`secret ${name} of ${id} given a value\n`);
    });
}
