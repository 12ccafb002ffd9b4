// Codebase routes: create/get/list/delete, file listing, and raw file transfer (PUT streams the request
// body into the codebase, GET streams a file back), any size, with the path checked before any byte moves.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { InvalidArgumentError, UnavailableError } from '@agentfense/protocol';
import { stallError, type StreamBudget } from '../../api/stream-budget.js';
import { FILE_CHUNK_BYTES } from '../../codebases/file-chunks.js';
import { splitCodebasePath } from '../../codebases/upload-path.js';
import type { HttpBackend } from '../backend.js';
import { GrpcCode } from '../../api/status.js';
import { defineRoute } from '../define.js';
import { errorReply } from '../errors.js';
import { codebaseToWire, fileToWire, pathId } from '../mapping.js';
import { pacedBody } from '../paced-body.js';
import {
  Codebase,
  CodebaseList,
  CreateCodebaseBody,
  Empty,
  FileEntry,
  FileList,
  FileParams,
  IdParams,
  ListCodebasesQuery,
  ListFilesQuery,
} from '../schemas.js';

const tags = ['codebases'];
const params = IdParams('codebase', 'cb');

interface IdParam {
  id: string;
}
interface FileParam {
  id: string;
  '*': string;
}

/** What the codebase routes need besides the backend. */
export interface CodebaseRouteOptions {
  /** Largest uploaded file: a larger declared Content-Length is refused before reading, 413. */
  readonly maxUploadBytes: number;
  /** Back-pressure of downloads (api/stream-budget.ts). */
  readonly streams: StreamBudget;
  /** Aborts when the server shuts down: downloads in progress end. */
  readonly shutdown: AbortSignal;
}

/** A 413 `{code, message}`; the connection closes, since the rest of the body is not read. */
function tooLarge(reply: FastifyReply, path: string, maxBytes: number): FastifyReply {
  return reply
    .status(413)
    .header('connection', 'close')
    .send(
      errorReply(
        'AF_INVALID_ARGUMENT',
        GrpcCode.INVALID_ARGUMENT,
        `${path} is larger than the upload limit of ${maxBytes} bytes`,
        { path, maxBytes },
      ),
    );
}

export function registerCodebaseRoutes(
  app: FastifyInstance,
  backend: HttpBackend,
  options: CodebaseRouteOptions,
): void {
  defineRoute<{ name: string; owner_id?: string }>(app, {
    method: 'POST',
    url: '/v1/codebases',
    operationId: 'CreateCodebase',
    summary: 'Create an empty codebase (then upload its files)',
    tags,
    body: CreateCodebaseBody,
    response: Codebase,
    handler: async (req) =>
      codebaseToWire(
        await backend.createCodebase({
          name: req.body.name,
          ...(req.body.owner_id === undefined ? {} : { ownerId: req.body.owner_id }),
        }),
      ),
  });

  defineRoute<unknown, { owner_id?: string; page_size?: number; page_token?: string }>(app, {
    method: 'GET',
    url: '/v1/codebases',
    operationId: 'ListCodebases',
    summary: 'List codebases, optionally of one owner, one page at a time',
    tags,
    querystring: ListCodebasesQuery,
    response: CodebaseList,
    handler: async (req) => {
      const page = await backend.listCodebases({
        ...(req.query.owner_id === undefined ? {} : { ownerId: req.query.owner_id }),
        ...(req.query.page_size === undefined ? {} : { pageSize: req.query.page_size }),
        ...(req.query.page_token === undefined || req.query.page_token === ''
          ? {}
          : { pageToken: req.query.page_token }),
      });
      return { codebases: page.items.map(codebaseToWire), next_page_token: page.nextPageToken ?? '' };
    },
  });

  defineRoute<unknown, unknown, IdParam>(app, {
    method: 'GET',
    url: '/v1/codebases/:id',
    operationId: 'GetCodebase',
    summary: 'Get a codebase',
    tags,
    params,
    response: Codebase,
    handler: async (req) => codebaseToWire(await backend.getCodebase(pathId('codebase', req.params.id))),
  });

  defineRoute<unknown, unknown, IdParam>(app, {
    method: 'DELETE',
    url: '/v1/codebases/:id',
    operationId: 'DeleteCodebase',
    summary: 'Delete a codebase (refused with 409 while sandboxes use it)',
    tags,
    params,
    response: Empty,
    handler: async (req) => {
      await backend.deleteCodebase(pathId('codebase', req.params.id));
      return {};
    },
  });

  defineRoute<unknown, { path?: string; recursive?: boolean }, IdParam>(app, {
    method: 'GET',
    url: '/v1/codebases/:id/files',
    operationId: 'ListFiles',
    summary: 'List a directory of a codebase (recursively when asked)',
    tags,
    params,
    querystring: ListFilesQuery,
    response: FileList,
    handler: async (req) => {
      const id = pathId('codebase', req.params.id);
      // Listings accept "/src" too: the original's paths were absolute within the codebase.
      const path = (req.query.path ?? '').replace(/^\/+/, '').replace(/\/+$/, '');
      splitCodebasePath(path, { allowRoot: true });
      const files = await backend.listFiles(id, { path, recursive: req.query.recursive === true });
      return { files: files.map(fileToWire) };
    },
  });

  // Raw file transfer lives in its own scope: its request bodies are bytes, never parsed, never limited.
  void app.register((scope, _options, done) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, _payload, parsed) => parsed(null));

    defineRoute<unknown, unknown, FileParam>(scope, {
      method: 'PUT',
      url: '/v1/codebases/:id/files/*',
      operationId: 'UploadFile',
      summary:
        'Upload one file: the request body is its content, streamed (any size up to the upload limit, else 413)',
      description:
        'Parent directories are created. The path must be relative and normalised: `..`, `.`, empty components, an absolute path or a NUL byte are a 400 before any byte is written. The file appears atomically.',
      tags,
      params: FileParams,
      response: FileEntry,
      doc: { requestContentType: 'application/octet-stream' },
      handler: async (req, reply) => {
        const id = pathId('codebase', req.params.id);
        const path = req.params['*'];
        splitCodebasePath(path);
        const declared = Number(req.headers['content-length']);
        if (Number.isFinite(declared) && declared > options.maxUploadBytes) {
          return tooLarge(reply, path, options.maxUploadBytes);
        }
        try {
          // The body stream fails when the client goes away mid-body; the signal also covers a
          // connection closed before the answer, once the body seemed complete.
          const gone = new AbortController();
          reply.raw.once('close', () => {
            if (!reply.raw.writableFinished) gone.abort();
          });
          return fileToWire(await backend.uploadFile(id, path, req.raw, { signal: gone.signal }));
        } catch (err) {
          // The control plane's own cap, found while streaming a body sent without a length.
          const maxBytes = err instanceof InvalidArgumentError ? err.details?.maxBytes : undefined;
          if (typeof maxBytes === 'number') return tooLarge(reply, path, maxBytes);
          // Answered before the body was read to its end (a full disk): the client is still sending it,
          // so this connection cannot carry another request.
          if (!req.raw.complete) void reply.header('connection', 'close');
          throw err;
        }
      },
    });

    defineRoute<unknown, unknown, FileParam>(scope, {
      method: 'GET',
      url: '/v1/codebases/:id/files/*',
      operationId: 'DownloadFile',
      summary: 'Download one file of a codebase as raw bytes',
      tags,
      params: FileParams,
      response: { type: 'string' },
      doc: { responseContentType: 'application/octet-stream' },
      handler: async (req, reply) => {
        const id = pathId('codebase', req.params.id);
        const path = req.params['*'];
        splitCodebasePath(path);
        const { stream, size } = await backend.downloadFile(id, path);
        // Back-pressure (paced-body.ts): a chunk is read once the client took the last one; a client that
        // takes nothing for the stall time has its connection closed (a short body, which it can tell).
        const paced = options.streams.open({
          streamBytes: FILE_CHUNK_BYTES,
          onStall: (stall) => body.destroy(stallError(stall)),
        });
        const body = pacedBody(stream, paced);
        // A download waiting for its client does not hold the server's shutdown.
        const stop = (): void => void body.destroy(new UnavailableError('the server is shutting down'));
        options.shutdown.addEventListener('abort', stop, { once: true });
        body.once('close', () => options.shutdown.removeEventListener('abort', stop));
        return reply.type('application/octet-stream').header('content-length', size).send(body);
      },
    });
    done();
  });
}
