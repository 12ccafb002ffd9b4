// `agentfense serve [--listen 127.0.0.1:8080] [--grpc-listen 127.0.0.1:9000] [--data DIR] [--token-file F]
// | --insecure-no-auth]`: the control plane as an HTTP service (docs/contract.md §7) and a gRPC service
// (sandbox.v1, the original's wire API) in the foreground, both over one backend and one bearer token: the
// --token-file one, else the data directory's (api-token.ts, made on first start). Only
// --insecure-no-auth serves without one, on loopback only and with a warning. An empty address disables
// a face. SIGINT/SIGTERM stop accepting on both, abort running commands, stop every sandbox's worker and
// unmount everything before the process exits.
import type { Command } from 'commander';
import { InvalidArgumentError, UnavailableError } from '@agentfense/protocol/core';
import type { parseListen } from '../../http/auth.js';
import { controlPlaneBackend, defaultMaxConcurrentStarts } from '../../http/backend.js';
import type { CliContext } from '../io.js';
import {
  addPlacementFlags,
  blobsFromFlags,
  placementFromFlags,
  type PlacementFlags,
} from '../placement-options.js';
import { untilSignal } from '../signals.js';
import { checkPostgresUrl, redactUrl } from '../../store/postgres/url.js';

interface ServeFlags extends PlacementFlags {
  readonly listen: string;
  readonly grpcListen: string;
  readonly data?: string;
  readonly tokenFile?: string;
  readonly insecureNoAuth?: boolean;
  readonly maxStarts?: string;
  readonly maxUploadBytes?: string;
  readonly database?: string;
}

/** Registers `serve` on the program. */
export function registerServe(program: Command, { io, result }: CliContext): void {
  const command = program
    .command('serve')
    .description(
      'serve the HTTP API (JSON over HTTP, routes in GET /v1/openapi.json) and the gRPC API (sandbox.v1) until SIGINT/SIGTERM',
    )
    .option(
      '--listen <host:port>',
      'HTTP address (port 0: any free port; "" disables HTTP)',
      '127.0.0.1:8080',
    )
    .option(
      '--grpc-listen <host:port>',
      'gRPC address, sandbox.v1 as the original\'s SDK speaks it (port 0: any free port; "" disables gRPC)',
      '127.0.0.1:9000',
    )
    .option('--data <dir>', 'the data directory (default $AGENTFENSE_DATA_DIR or ~/.local/share/agentfense)')
    .option(
      '--token-file <file>',
      'the bearer token is the one in this file (default: <data>/api-token, made on first start)',
    )
    .option(
      '--insecure-no-auth',
      'serve without authentication, on loopback only: every local user can then use the API',
    )
    .option(
      '--max-starts <n>',
      `sandbox starts run at most n at a time, the rest queue (default: the CPU count, ${defaultMaxConcurrentStarts()} here)`,
    )
    .option(
      '--database <url>',
      'keep the sandbox, codebase and checkpoint records in this PostgreSQL database (postgres://user@host/db) instead of the data directory, shared by every replica given the same URL and data directory (default $AGENTFENSE_DATABASE; a password is better in PGPASSWORD or ~/.pgpass than on a command line)',
    )
    .option(
      '--max-upload-bytes <n>',
      'largest uploaded file; larger uploads are refused with 413 (default 1 GiB)',
    );
  addPlacementFlags(command).action(async (flags: ServeFlags) => {
    // Loaded only by the command that serves: the control plane and both servers are the heaviest
    // modules of the CLI, which every other command would otherwise pay for at start-up.
    const [
      { assertListenAllowed, parseListen, readTokenFile },
      { ensureApiToken },
      { ensurePrivateDir, resolveDataDir },
      { ControlPlane },
      { createHttpServer },
      { createGrpcServer },
      { StreamBudget },
      { FsBlobStore },
    ] = await Promise.all([
      import('../../http/auth.js'),
      import('../../http/api-token.js'),
      import('../../paths.js'),
      import('../../control-plane.js'),
      import('../../http/server.js'),
      import('../../grpc/server.js'),
      import('../../api/stream-budget.js'),
      import('@agentfense/blobs'),
    ]);
    const httpAddress = flags.listen === '' ? undefined : parseListen(flags.listen);
    const grpcAddress = flags.grpcListen === '' ? undefined : parseGrpcListen(flags.grpcListen, parseListen);
    if (httpAddress === undefined && grpcAddress === undefined) {
      throw new InvalidArgumentError('--listen and --grpc-listen are both empty: nothing to serve');
    }
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
    // The flag, else the environment (which, unlike argv, other local users cannot read).
    const database = flags.database ?? (process.env['AGENTFENSE_DATABASE'] || undefined);
    if (database !== undefined) checkPostgresUrl(database);
    const placement = await placementFromFlags(flags);
    const blobs = await blobsFromFlags(flags, placement);
    // One bound for the streams of both faces (AGENTFENSE_STREAM_STALL_SECONDS checked here, up front).
    const streams = new StreamBudget();
    const insecure = flags.insecureNoAuth === true;
    if (insecure && flags.tokenFile !== undefined) {
      throw new InvalidArgumentError(
        '--insecure-no-auth and --token-file contradict each other: give one of them',
      );
    }
    const fileToken = flags.tokenFile === undefined ? undefined : await readTokenFile(flags.tokenFile);
    // Before anything is opened: neither face may be reachable from elsewhere without a token.
    for (const address of [httpAddress, grpcAddress]) {
      if (address !== undefined) assertListenAllowed(address, !insecure);
    }
    if (insecure) {
      io.stderr.write(
        'agentfense: WARNING: --insecure-no-auth: no authentication; every local user and process that can connect to this port can read the codebases and run commands in sandboxes. Use it only on a single-user machine.\n',
      );
    }
    // The data directory's token, made (with the directory, 0700) on first start.
    let dataToken: Awaited<ReturnType<typeof ensureApiToken>> | undefined;
    if (!insecure && fileToken === undefined) {
      const dir = resolveDataDir({ dataDir: flags.data });
      await ensurePrivateDir(dir);
      dataToken = await ensureApiToken(dir);
    }
    const token = fileToken ?? dataToken?.token;
    const blobStore = blobs === undefined ? undefined : await FsBlobStore.open(blobs.dir);
    const signal = untilSignal();
    try {
      const plane = await ControlPlane.open({
        ...(flags.data === undefined ? {} : { dataDir: flags.data }),
        ...(maxUploadBytes === undefined ? {} : { maxUploadBytes }),
        ...(database === undefined ? {} : { database }),
        // With a blob store, placed sandboxes reach their nodes as snapshots in it.
        ...(placement === undefined
          ? {}
          : { placement: blobStore === undefined ? placement : { ...placement, blobs: blobStore } }),
      });
      // What earlier processes left behind (dead one-shot sandboxes, failed destroys, orphaned
      // directories and mounts); linked codebases are kept, API clients may still refer to them.
      const collected = await plane.gc({ codebases: false });
      const removed = collected.sandboxes.length + collected.directories.length + collected.mounts.length;
      if (removed > 0)
        io.stderr.write(`agentfense: gc: removed ${removed} leftover(s) (see agentfense gc --dry-run)\n`);
      // One backend behind both faces: the same sandboxes, sessions and start queue.
      // Replicas sharing a database leave a sandbox created but not started to whichever starts it.
      const backend = controlPlaneBackend(plane, {
        ...(maxStarts === undefined ? {} : { maxConcurrentStarts: maxStarts }),
        // A placed sandbox is owned by no process: it is created unowned and any replica starts it.
        ...(database === undefined && placement === undefined ? {} : { ownCreated: false }),
      });
      const http =
        httpAddress === undefined
          ? undefined
          : createHttpServer({
              backend,
              ...(token === undefined ? { insecureNoAuth: true } : { token }),
              ...(maxUploadBytes === undefined ? {} : { maxUploadBytes }),
              logger: plane.logger.child({ component: 'http' }),
              streams,
              ...(blobStore === undefined || blobs === undefined
                ? {}
                : { blobs: { store: blobStore, readerToken: blobs.readerToken } }),
            });
      const grpc =
        grpcAddress === undefined
          ? undefined
          : createGrpcServer({
              backend,
              ...(token === undefined ? { insecureNoAuth: true } : { token }),
              logger: plane.logger.child({ component: 'grpc' }),
              streams,
            });
      try {
        const served: string[] = [];
        if (http !== undefined && httpAddress !== undefined) {
          const bound = await listening(flags.listen, () => http.listen(httpAddress));
          served.push(`http://${hostPort(bound)}`);
        }
        if (grpc !== undefined && grpcAddress !== undefined) {
          const bound = await listening(flags.grpcListen, () => grpc.listen(grpcAddress));
          served.push(`grpc://${hostPort(bound)}`);
        }
        io.stderr.write(
          `agentfense: serving ${served.join(' and ')} (data ${plane.dataDir}${
            database === undefined ? '' : `, records in ${redactUrl(database)}`
          }${placement === undefined ? '' : `, sandboxes placed through ${flags.orchestrator ?? ''}`}, ${
            token === undefined
              ? 'NO AUTHENTICATION'
              : `bearer token required, the one in ${dataToken?.file ?? flags.tokenFile ?? ''}`
          }); Ctrl-C stops\n`,
        );
        const ended = await signal.promise;
        io.stderr.write(`agentfense: ${ended}: stopping sandboxes and unmounting\n`);
      } finally {
        // gRPC first: its close aborts its commands and ends its calls at once, so the HTTP close,
        // which closes the backend after its own requests end, never pulls it from under a gRPC call.
        await grpc?.close();
        await (http === undefined ? backend.close() : http.close());
      }
    } finally {
      signal.dispose();
    }
    io.stderr.write('agentfense: stopped\n');
    result.exitCode = 0;
  });
}

async function listening<T>(flag: string, listen: () => Promise<T>): Promise<T> {
  try {
    return await listen();
  } catch (err) {
    throw new UnavailableError(`cannot listen on ${flag}: ${(err as Error).message}`, { cause: err });
  }
}

function hostPort(address: { host: string; port: number }): string {
  return `${address.host.includes(':') ? `[${address.host}]` : address.host}:${address.port}`;
}

/** parseListen, with the error naming the flag that was wrong. */
function parseGrpcListen(value: string, parse: typeof parseListen): ReturnType<typeof parseListen> {
  try {
    return parse(value);
  } catch (err) {
    if (!(err instanceof InvalidArgumentError)) throw err;
    throw new InvalidArgumentError(err.message.replace('--listen', '--grpc-listen'));
  }
}
