// `GET /v1/blobs/<digest>` (and HEAD): the blob store's HTTP backend, for node agents without a shared
// filesystem (`agentfense node --blobs https://…`, docs/scale-out.md#the-blob-store). The readers are
// the node agents, so the token is theirs (the one serve holds to call them), not the API clients':
// the route skips the API token's hook and checks its own. No token or a wrong one is 401; the API
// token is 403 (an API client has no business reading raw blobs: a codebase's files have their own
// routes, which check who may reach them). The digest is checked before it names a file.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { blobErrorReason, parseDigest, type BlobReader } from '@agentfense/blobs';
import { InvalidArgumentError, UnavailableError } from '@agentfense/protocol';
import { GrpcCode } from '../../api/status.js';
import type { BearerAuth } from '../auth.js';
import { defineRoute } from '../define.js';
import { errorReply } from '../errors.js';

export interface BlobRouteOptions {
  /** The store blobs are served from (serve's `--blobs DIR`). */
  readonly store: BlobReader;
  /** The node agents' token: the only one this route accepts. */
  readonly readers: BearerAuth;
  /** The API clients' token, told apart from a wrong one (403 rather than 401); none without auth. */
  readonly api: BearerAuth | undefined;
  readonly shutdown: AbortSignal;
}

const DigestParams = {
  type: 'object',
  properties: { digest: { type: 'string' } },
  required: ['digest'],
} as const;

export function registerBlobRoutes(app: FastifyInstance, options: BlobRouteOptions): void {
  const refuse = (request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined => {
    const header = request.headers.authorization;
    if (options.readers.check(header)) return undefined;
    if (options.api?.check(header) === true) {
      return reply
        .status(403)
        .send(
          errorReply(
            'AF_PERMISSION_DENIED',
            GrpcCode.PERMISSION_DENIED,
            "blobs are read by node agents with the node agents' token, not with the API token",
          ),
        );
    }
    return reply
      .status(401)
      .header('www-authenticate', 'Bearer realm="agentfense-blobs"')
      .send(
        errorReply(
          'AF_PERMISSION_DENIED',
          GrpcCode.UNAUTHENTICATED,
          "missing or invalid bearer token (blobs take the node agents' token)",
        ),
      );
  };

  const digestOf = (value: string): ReturnType<typeof parseDigest> => {
    try {
      return parseDigest(value);
    } catch {
      throw new InvalidArgumentError(
        'a blob is named by its SHA-256: 64 lowercase hex characters, nothing else (no path)',
        { details: { reason: 'invalid-digest' } },
      );
    }
  };

  for (const method of ['GET', 'HEAD'] as const) {
    defineRoute<unknown, unknown, { digest: string }>(app, {
      method,
      url: '/v1/blobs/:digest',
      operationId: method === 'GET' ? 'GetBlob' : 'HeadBlob',
      summary:
        method === 'GET'
          ? "One blob's bytes (node agents, with their token)"
          : "One blob's size as Content-Length (node agents, with their token)",
      tags: ['blobs'],
      params: DigestParams,
      response: { type: 'string' },
      // The API token's hook is skipped: this route checks the node agents' token itself.
      doc: { responseContentType: 'application/octet-stream', auth: false },
      handler: async (req, reply) => {
        if (refuse(req, reply) !== undefined) return reply;
        const digest = digestOf(req.params.digest);
        const size = await options.store.size(digest);
        if (size === undefined) {
          return reply
            .status(404)
            .send(errorReply('AF_NOT_FOUND', GrpcCode.NOT_FOUND, `no blob ${digest}`, { digest }));
        }
        void reply.type('application/octet-stream').header('content-length', size);
        if (method === 'HEAD') return reply.send();
        // The store's stream fails at its end when the bytes on disk are not the digest's: the answer is
        // then cut short of its Content-Length, which the node sees (and its own hash refuses anyway).
        const body = await options.store.get(digest).catch((err: unknown) => {
          if (blobErrorReason(err) === 'not-found') throw err;
          throw new UnavailableError(`blob ${digest} cannot be read: ${(err as Error).message}`);
        });
        const stop = (): void => void body.destroy(new UnavailableError('the server is shutting down'));
        options.shutdown.addEventListener('abort', stop, { once: true });
        body.once('close', () => options.shutdown.removeEventListener('abort', stop));
        return reply.send(body);
      },
    });
  }
}
