// `agentfense serve [--listen 127.0.0.1:9000] [--data DIR] [--token-file F]`: the control plane as an
// HTTP service (SPEC §7) in the foreground. SIGINT/SIGTERM stop accepting, abort running commands, stop
// every sandbox's worker and unmount everything before the process exits.
import type { Command } from 'commander';
import { InvalidArgumentError, UnavailableError } from '@agentfense/protocol';
import { ControlPlane } from '../../control-plane.js';
import { assertListenAllowed, parseListen, readTokenFile } from '../../http/auth.js';
import { controlPlaneBackend, defaultMaxConcurrentStarts } from '../../http/backend.js';
import { createHttpServer } from '../../http/server.js';
import type { CliContext } from '../io.js';
import { untilSignal } from '../signals.js';

interface ServeFlags {
  readonly listen: string;
  readonly data?: string;
  readonly tokenFile?: string;
  readonly maxStarts?: string;
  readonly maxUploadBytes?: string;
}

/** Registers `serve` on the program. */
export function registerServe(program: Command, { io, result }: CliContext): void {
  program
    .command('serve')
    .description('serve the HTTP API (JSON over HTTP, routes in GET /v1/openapi.json) until SIGINT/SIGTERM')
    .option('--listen <host:port>', 'address to listen on (port 0: any free port)', '127.0.0.1:9000')
    .option('--data <dir>', 'the data directory (default $AGENTFENSE_DATA_DIR or ~/.local/share/agentfense)')
    .option(
      '--token-file <file>',
      'require "Authorization: Bearer <token>" with the token in this file (needed to listen beyond loopback)',
    )
    .option(
      '--max-starts <n>',
      `sandbox starts run at most n at a time, the rest queue (default: the CPU count, ${defaultMaxConcurrentStarts()} here)`,
    )
    .option(
      '--max-upload-bytes <n>',
      'largest uploaded file; larger uploads are refused with 413 (default 1 GiB)',
    )
    .action(async (flags: ServeFlags) => {
      const address = parseListen(flags.listen);
      const maxStarts = flags.maxStarts === undefined ? undefined : Number(flags.maxStarts);
      if (maxStarts !== undefined && !(Number.isSafeInteger(maxStarts) && maxStarts >= 1)) {
        throw new InvalidArgumentError(`--max-starts must be a positive integer, got ${flags.maxStarts}`);
      }
      const maxUploadBytes = flags.maxUploadBytes === undefined ? undefined : Number(flags.maxUploadBytes);
      if (maxUploadBytes !== undefined && !(Number.isSafeInteger(maxUploadBytes) && maxUploadBytes >= 1)) {
        throw new InvalidArgumentError(
          `--max-upload-bytes must be a positive integer, got ${flags.maxUploadBytes}`,
        );
      }
      const token = flags.tokenFile === undefined ? undefined : await readTokenFile(flags.tokenFile);
      assertListenAllowed(address, token !== undefined); // before anything is opened
      const signal = untilSignal();
      try {
        const plane = await ControlPlane.open({
          ...(flags.data === undefined ? {} : { dataDir: flags.data }),
          ...(maxUploadBytes === undefined ? {} : { maxUploadBytes }),
        });
        const server = createHttpServer({
          backend: controlPlaneBackend(
            plane,
            maxStarts === undefined ? {} : { maxConcurrentStarts: maxStarts },
          ),
          ...(token === undefined ? {} : { token }),
          ...(maxUploadBytes === undefined ? {} : { maxUploadBytes }),
          logger: plane.logger.child({ component: 'http' }),
        });
        try {
          let bound;
          try {
            bound = await server.listen(address);
          } catch (err) {
            throw new UnavailableError(`cannot listen on ${flags.listen}: ${(err as Error).message}`, {
              cause: err,
            });
          }
          const host = bound.host.includes(':') ? `[${bound.host}]` : bound.host;
          io.stderr.write(
            `agentfense: serving http://${host}:${bound.port} (data ${plane.dataDir}, ${
              token === undefined ? 'no authentication' : 'bearer token required'
            }); Ctrl-C stops\n`,
          );
          const ended = await signal.promise;
          io.stderr.write(`agentfense: ${ended}: stopping sandboxes and unmounting\n`);
        } finally {
          await server.close();
        }
      } finally {
        signal.dispose();
      }
      io.stderr.write('agentfense: stopped\n');
      result.exitCode = 0;
    });
}
