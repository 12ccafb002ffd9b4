// The CLI's client of a running `agentfense serve`: sessions live in the process that runs their sandbox,
// so session commands across CLI invocations go through the server. Errors come back as the same error
// classes (from `{ code, message }`), so the CLI maps them to exit statuses exactly like local failures.
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { UnavailableError, fromWire } from '@agentfense/protocol/core';
import { readApiToken } from '../http/api-token.js';
import { resolveDataDir } from '../paths.js';

/** The server the CLI talks to when none is named. */
export const DEFAULT_SERVER = 'http://127.0.0.1:8080';
/** Environment variables that name the server and its token file. */
export const SERVER_ENV = 'AGENTFENSE_SERVER';
export const TOKEN_FILE_ENV = 'AGENTFENSE_TOKEN_FILE';

export interface ServerFlags {
  readonly server?: string;
  readonly tokenFile?: string;
  /** The data directory whose api-token is sent when no token file is named. */
  readonly data?: string;
}

/**
 * Adds `--server URL` and `--token-file F` to a command. Without a token file, the token of the data
 * directory (`--data`, which the command adds itself) is sent: the one `agentfense serve` made there.
 */
export function addServerOptions(command: Command): Command {
  return command
    .option('--server <url>', `the agentfense serve address (default $${SERVER_ENV} or ${DEFAULT_SERVER})`)
    .option(
      '--token-file <file>',
      `bearer token for the server (default $${TOKEN_FILE_ENV}, else the data directory's api-token)`,
    );
}

/** A JSON-over-HTTP client of one server. */
export class ServerClient {
  readonly base: string;
  readonly #token: string | undefined;

  private constructor(base: string, token: string | undefined) {
    this.base = base.replace(/\/+$/, '');
    this.#token = token;
  }

  static async fromFlags(flags: ServerFlags): Promise<ServerClient> {
    const base = flags.server ?? process.env[SERVER_ENV] ?? DEFAULT_SERVER;
    const tokenFile = flags.tokenFile ?? process.env[TOKEN_FILE_ENV];
    const token =
      tokenFile === undefined
        ? await readApiToken(resolveDataDir({ dataDir: flags.data }))
        : (await readFile(tokenFile, 'utf8')).trim();
    return new ServerClient(base, token);
  }

  /** Calls `method path` with an optional JSON body; resolves with the JSON answer. */
  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    let response: Response;
    try {
      response = await fetch(`${this.base}${path}`, {
        method,
        headers: {
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(this.#token === undefined ? {} : { authorization: `Bearer ${this.#token}` }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (err) {
      throw new UnavailableError(
        `cannot reach the agentfense server at ${this.base} (start one with \`agentfense serve\`, or pass --server): ${(err as Error).message}`,
        { cause: err },
      );
    }
    const text = await response.text();
    const json: unknown = text === '' ? {} : JSON.parse(text);
    if (!response.ok) {
      // google.rpc.Status: our error kind is the ErrorInfo reason, its details the metadata.
      const error = json as {
        message?: unknown;
        details?: { reason?: unknown; metadata?: Record<string, unknown> }[];
      };
      const info = error.details?.find((d) => typeof d.reason === 'string');
      // A refused token: say where the CLI looked for one, and how to name the right one.
      const hint =
        response.status === 401
          ? ` (the CLI sends --token-file's token, else $${TOKEN_FILE_ENV}'s, else the data directory's api-token: give the server's data directory with --data or its token file with --token-file)`
          : '';
      throw fromWire({
        code: info?.reason,
        message: `${typeof error.message === 'string' ? error.message : `HTTP ${response.status}`}${hint}`,
        ...(info?.metadata === undefined || Object.keys(info.metadata).length === 0
          ? {}
          : { details: info.metadata }),
      });
    }
    return json as T;
  }
}
