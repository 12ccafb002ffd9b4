// `agentfense session create|exec|list|close` (through a running `agentfense serve`) and
// `agentfense shell <dir | sandbox>`: a persistent shell for a person — on a fresh local sandbox over a
// directory, or as a session of a sandbox the server runs (contract §5).
import { createInterface } from 'node:readline';
import { stat } from 'node:fs/promises';
import type { Command } from 'commander';
import { InvalidArgumentError, TimeoutError } from '@agentfense/protocol/core';
import { addDataOption } from '../control-options.js';
import type { DataFlags } from '../control-options.js';
import { isTerminal, printJson, formatTable } from '../io.js';
import { terminalWriter } from '../terminal-filter.js';
import type { CliContext, CliIo, CliResult } from '../io.js';
import { parseEnvPairs, parseSeconds } from '../parse.js';
import { addNetworkOptions, networkFromFlags } from '../network-options.js';
import { addSecretOptions, secretsFromFlags } from '../secret-options.js';
import type { SecretFlags } from '../secret-options.js';
import type { NetworkFlags } from '../network-options.js';
import { addPolicyOptions, policyFromFlags } from '../policy-options.js';
import type { PolicyFlags } from '../policy-options.js';
import type { SessionShell } from '@agentfense/sessions';
import { ServerClient, addServerOptions } from '../server-client.js';
import type { ServerFlags } from '../server-client.js';

interface WireSession {
  readonly id: string;
  readonly sandboxId: string;
  readonly status: string;
  readonly shell: string;
  readonly createdAt: string;
}

interface WireSessionResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  readonly sessionClosed: boolean;
}

/** What the shell loop needs of a session, local or remote. */
interface ShellSession {
  exec(command: string): Promise<{
    stdout: Uint8Array | string;
    stderr: Uint8Array | string;
    exitCode: number | null;
    closed: boolean;
  }>;
  close(): Promise<void>;
}

/**
 * A timed-out command is a DEADLINE_EXCEEDED answer (as the original's gateway gives); its result, with
 * the output so far, is in the error's details.
 */
function timedOutResult(err: unknown): WireSessionResult {
  if (!(err instanceof TimeoutError) || err.details === undefined) throw err;
  const d = err.details;
  return {
    stdout: typeof d.stdout === 'string' ? d.stdout : '',
    stderr: typeof d.stderr === 'string' ? d.stderr : '',
    exitCode: null,
    timedOut: true,
    sessionClosed: d.sessionClosed === 'true',
  };
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

function remoteSession(client: ServerClient, id: string): ShellSession {
  return {
    exec: async (command) => {
      const r = await client.call<WireSessionResult>('POST', `/v1/sessions/${id}/exec`, { command });
      return { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode, closed: r.sessionClosed };
    },
    close: async () => {
      await client.call('DELETE', `/v1/sessions/${id}`).catch(() => undefined);
    },
  };
}

/** A command's output: on a terminal, colours pass and other escape sequences are shown, not obeyed. */
function writeOutput(
  io: CliIo,
  r: { readonly stdout: string | Uint8Array; readonly stderr: string | Uint8Array },
  rawOutput: boolean,
): void {
  for (const [stream, data] of [
    [io.stdout, r.stdout],
    [io.stderr, r.stderr],
  ] as const) {
    const writer = terminalWriter(stream, isTerminal(stream) && !rawOutput);
    writer.write(data);
    writer.end();
  }
}

/**
 * Reads command lines from stdin and runs each in the session, output as it returns. On a terminal a
 * prompt is shown. Ends at EOF (status 0) or when the shell exits (its status).
 */
async function shellLoop(
  io: CliIo,
  result: CliResult,
  session: ShellSession,
  rawOutput: boolean,
): Promise<void> {
  const interactive = process.stdin.isTTY === true;
  const lines = createInterface({
    input: process.stdin,
    ...(interactive ? { output: process.stdout, prompt: 'agentfense$ ' } : {}),
  });
  if (interactive) lines.prompt();
  try {
    for await (const line of lines) {
      if (line.trim() !== '') {
        const r = await session.exec(line);
        writeOutput(io, r, rawOutput);
        result.exitCode = r.exitCode ?? 1;
        if (r.closed) return;
      }
      if (interactive) lines.prompt();
    }
    result.exitCode = 0;
  } finally {
    lines.close();
    await session.close();
  }
}

/** Registers `session` and `shell` on the program. */
export function registerSessions(program: Command, { io, result }: CliContext): void {
  const session = program
    .command('session')
    .description('persistent shells in sandboxes run by `agentfense serve`');

  addDataOption(
    addServerOptions(
      session
        .command('create')
        .description('open a session in a running sandbox; prints its id')
        .argument('<sandbox>', 'sandbox id'),
    ),
  )
    .option('--shell <path>', '/bin/sh (default) or /bin/bash')
    .option('--env <K=V>', 'initial environment (repeatable)', collect, [])
    .option('--json', 'print the session as JSON')
    .action(
      async (sandbox: string, flags: ServerFlags & { shell?: string; env: string[]; json?: boolean }) => {
        const client = await ServerClient.fromFlags(flags);
        const created = await client.call<WireSession>(
          'POST',
          `/v1/sandboxes/${encodeURIComponent(sandbox)}/sessions`,
          {
            env: parseEnvPairs(flags.env),
            ...(flags.shell === undefined ? {} : { shell: flags.shell }),
          },
        );
        if (flags.json === true) printJson(io, created);
        else io.stdout.write(`${created.id}\n`);
      },
    );

  addDataOption(
    addServerOptions(
      session
        .command('exec')
        .description(
          'run one command line in a session (cd, export, functions persist); exits with its status',
        )
        .argument('<session>', 'session id (ses_…)')
        .argument('<command...>', 'the shell command line (joined with spaces)'),
    ),
  )
    .option('--timeout <seconds>', 'interrupt the command after this long (the session stays usable)')
    .option('--json', 'print the result as JSON')
    .option(
      '--raw-output',
      "on a terminal, pass the command's escape sequences as they are (default: colours only)",
    )
    .action(
      async (
        id: string,
        words: string[],
        flags: ServerFlags & { timeout?: string; json?: boolean; rawOutput?: boolean },
      ) => {
        const client = await ServerClient.fromFlags(flags);
        const timeout = flags.timeout === undefined ? undefined : parseSeconds(flags.timeout, '--timeout');
        const r = await client
          .call<WireSessionResult>('POST', `/v1/sessions/${encodeURIComponent(id)}/exec`, {
            command: words.join(' '),
            ...(timeout === undefined ? {} : { timeout }),
          })
          .catch(timedOutResult);
        if (flags.json === true) printJson(io, r);
        else writeOutput(io, r, flags.rawOutput === true);
        result.exitCode = r.timedOut ? 124 : (r.exitCode ?? 1);
      },
    );

  addDataOption(
    addServerOptions(
      session
        .command('list')
        .description('list the sessions of a sandbox')
        .argument('<sandbox>', 'sandbox id'),
    ),
  )
    .option('--json', 'print a JSON array')
    .action(async (sandbox: string, flags: ServerFlags & { json?: boolean }) => {
      const client = await ServerClient.fromFlags(flags);
      const { sessions } = await client.call<{ sessions: WireSession[] }>(
        'GET',
        `/v1/sandboxes/${encodeURIComponent(sandbox)}/sessions`,
      );
      if (flags.json === true) printJson(io, sessions);
      else if (sessions.length === 0) io.stderr.write('agentfense: no sessions\n');
      else
        io.stdout.write(
          `${formatTable([['ID', 'STATUS', 'SHELL', 'CREATED'], ...sessions.map((s) => [s.id, s.status, s.shell, s.createdAt])])}\n`,
        );
    });

  addDataOption(
    addServerOptions(
      session
        .command('close')
        .description('close sessions (their processes are killed)')
        .argument('<session...>', 'session ids'),
    ),
  ).action(async (ids: string[], flags: ServerFlags) => {
    const client = await ServerClient.fromFlags(flags);
    for (const id of ids) {
      await client.call('DELETE', `/v1/sessions/${encodeURIComponent(id)}`);
      io.stderr.write(`agentfense: closed ${id}\n`);
    }
  });

  addSecretOptions(
    addNetworkOptions(
      addDataOption(
        addServerOptions(
          addPolicyOptions(
            program
              .command('shell')
              .description(
                'an interactive shell: in a fresh sandbox over <dir>, or in a sandbox `agentfense serve` runs',
              )
              .argument(
                '<target>',
                'a directory (local sandbox, destroyed at exit) or a sandbox id (sb_…, via the server)',
              ),
          ),
        ),
      ),
    ),
  )
    .option('--shell <path>', '/bin/sh (default) or /bin/bash')
    .option(
      '--raw-output',
      "on a terminal, pass the commands' escape sequences as they are (default: colours only)",
    )
    .action(
      async (
        target: string,
        flags: PolicyFlags &
          ServerFlags &
          DataFlags &
          NetworkFlags &
          SecretFlags & { shell?: string; rawOutput?: boolean },
      ) => {
        const raw = flags.rawOutput === true;
        // The session validates the shell and names the allowed ones.
        const shell = flags.shell === undefined ? {} : { shell: flags.shell as SessionShell };
        if (target.startsWith('sb_')) {
          if (
            flags.preset !== undefined ||
            flags.rules !== undefined ||
            (await networkFromFlags(flags)) !== undefined ||
            flags.secret !== undefined ||
            flags.secretFile !== undefined
          ) {
            throw new InvalidArgumentError(
              '--preset, --rules, the network and secret options apply to a local directory, not to a running sandbox',
            );
          }
          const client = await ServerClient.fromFlags(flags);
          const created = await client.call<WireSession>(
            'POST',
            `/v1/sandboxes/${encodeURIComponent(target)}/sessions`,
            shell,
          );
          io.stderr.write(`agentfense: session ${created.id} in ${target}; Ctrl-D ends it\n`);
          await shellLoop(io, result, remoteSession(client, created.id), raw);
          return;
        }
        const info = await stat(target).catch(() => null);
        if (info?.isDirectory() !== true) {
          throw new InvalidArgumentError(`${target} is neither a directory nor a sandbox id (sb_…)`);
        }
        const rules = await policyFromFlags(flags);
        const network = await networkFromFlags(flags);
        const secrets = await secretsFromFlags(flags, { cwd: process.cwd() });
        const { Sandbox } = await import('../../library/sandbox.js');
        const sb = await Sandbox.fromLocal(target, {
          rules,
          ...(network === undefined ? {} : { network }),
          ...(secrets.length === 0 ? {} : { secrets }),
          ...(flags.data === undefined ? {} : { dataDir: flags.data }),
        });
        try {
          const local = await sb.session(shell);
          io.stderr.write(
            `agentfense: sandbox ${sb.id} over ${target}; Ctrl-D ends it (changes are discarded)\n`,
          );
          await shellLoop(
            io,
            result,
            {
              exec: async (command) => {
                const r = await local.run(command, { encoding: 'buffer' });
                return { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode, closed: r.sessionClosed };
              },
              close: () => local.close(),
            },
            raw,
          );
        } finally {
          await sb.destroy();
        }
      },
    );
}
