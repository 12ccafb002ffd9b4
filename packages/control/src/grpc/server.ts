// The gRPC face: sandbox.v1.SandboxService and sandbox.v1.CodebaseService on @grpc/grpc-js,
// over the same backend as the HTTP face, behind the same bearer token (metadata `authorization:
// Bearer <token>`). `createGrpcServer` builds it; `listen`/`close` run and stop it. Closing aborts
// running commands and waits for calls to end; it does not close the backend, which the caller owns.
import { Server, ServerCredentials, status as Status } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { assertListenAllowed, authOf, refuseNonLoopback, type ListenAddress } from '../http/auth.js';
import type { HttpBackend as Backend } from '../http/backend.js';
import { StreamBudget } from '../api/stream-budget.js';
import { DEFAULT_BODY_LIMIT } from '../http/server.js';
import { codebaseService } from './codebase-service.js';
import { CodebaseServiceService } from './gen/sandbox/v1/codebase.js';
import { SandboxServiceService } from './gen/sandbox/v1/sandbox.js';
import type { HandlerContext, SurfaceCall } from './handlers.js';
import { sandboxService } from './sandbox-service.js';
import { grpcError } from './status.js';

/**
 * Largest request message: an ExecRequest's stdin may be as large as an HTTP exec body (16 MiB), plus
 * room for the other fields. File content travels in many small UploadChunks, so it is not bounded here.
 */
export const MAX_RECEIVE_BYTES = DEFAULT_BODY_LIMIT + 64 * 1024;
/** How long close() lets running calls finish after aborting their commands before cutting them off. */
const CLOSE_GRACE_MS = 5_000;

export interface GrpcServerOptions {
  readonly backend: Backend;
  /** Require metadata `authorization: Bearer <token>` on every call. */
  readonly token?: string;
  /** Serve without a token (loopback only, loopback `:authority` only); required when `token` is absent. */
  readonly insecureNoAuth?: boolean;
  readonly logger?: Logger;
  /** Back-pressure of its streams; `serve` shares one with its HTTP face. Default: its own. */
  readonly streams?: StreamBudget;
}

export interface GrpcServer {
  /** Listens (refusing a non-loopback address without a token); resolves with the bound address. */
  listen(address: ListenAddress): Promise<ListenAddress>;
  /** Aborts running commands, refuses new calls, waits for the running ones (at most 5 s). Idempotent. */
  close(): Promise<void>;
}

export function createGrpcServer(options: GrpcServerOptions): GrpcServer {
  const auth = authOf(options);
  const shutdown = new AbortController();
  const streams = options.streams ?? new StreamBudget();
  const context: HandlerContext = {
    shutdown: shutdown.signal,
    logger: options.logger,
    streams,
    authenticate: (call: SurfaceCall) => {
      if (auth === undefined) {
        // DNS rebinding, as on the HTTP face: only calls addressed to a loopback name are answered.
        const refused = refuseNonLoopback({ host: call.getHost() });
        return refused === undefined
          ? undefined
          : grpcError(Status.PERMISSION_DENIED, refused, 'AF_PERMISSION_DENIED');
      }
      const [header] = call.metadata.get('authorization');
      if (auth.check(typeof header === 'string' ? header : undefined)) return undefined;
      return grpcError(
        Status.UNAUTHENTICATED,
        'missing or invalid bearer token: send metadata "authorization: Bearer <token>"',
        'AF_PERMISSION_DENIED',
      );
    },
  };
  const server = new Server({ 'grpc.max_receive_message_length': MAX_RECEIVE_BYTES });
  server.addService(SandboxServiceService, sandboxService(options.backend, context));
  server.addService(CodebaseServiceService, codebaseService(options.backend, context));

  let closing: Promise<void> | undefined;
  return {
    async listen(address) {
      assertListenAllowed(address, auth !== undefined);
      const host = address.host.includes(':') ? `[${address.host}]` : address.host;
      const port = await new Promise<number>((resolve, reject) => {
        server.bindAsync(`${host}:${address.port}`, ServerCredentials.createInsecure(), (err, bound) =>
          err === null ? resolve(bound) : reject(err),
        );
      });
      return { host: address.host, port };
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        shutdown.abort();
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, CLOSE_GRACE_MS);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      });
      return closing;
    },
  };
}
