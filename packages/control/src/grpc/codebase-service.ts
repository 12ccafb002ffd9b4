// sandbox.v1.CodebaseService over the shared backend (the HTTP face's): codebases, uploads as a client
// stream (metadata first, then data chunks), downloads as a server stream of ≤ 64 KiB chunks, listings.
import { createHash } from 'node:crypto';
import type { ServerReadableStream } from '@grpc/grpc-js';
import { CancelledError, InvalidArgumentError } from '@agentfense/protocol';
import type { HttpBackend as Backend } from '../http/backend.js';
import { codebasePath, codebaseToProto, fileToProto, optional, requestId } from './convert.js';
import type {
  CodebaseServiceServer,
  UploadChunk,
  UploadChunk_Metadata,
  UploadResult,
} from './gen/sandbox/v1/codebase.js';
import { clientStream, serverStream, unary, type HandlerContext } from './handlers.js';
import { pacedCall } from './paced-call.js';

/** Largest chunk DownloadFile sends (the original's size; the SDK joins them). */
export const DOWNLOAD_CHUNK_BYTES = 64 * 1024;

export function codebaseService(backend: Backend, context: HandlerContext): CodebaseServiceServer {
  return {
    createCodebase: unary(context, 'CreateCodebase', async (req) => {
      if (req.name === '') throw new InvalidArgumentError('name is required');
      const ownerId = optional(req.ownerId);
      return codebaseToProto(
        await backend.createCodebase({ name: req.name, ...(ownerId === undefined ? {} : { ownerId }) }),
      );
    }),
    getCodebase: unary(context, 'GetCodebase', async (req) =>
      codebaseToProto(await backend.getCodebase(requestId('codebase', 'codebase_id', req.codebaseId))),
    ),
    listCodebases: unary(context, 'ListCodebases', async (req) => {
      const ownerId = optional(req.ownerId);
      const pageToken = optional(req.pageToken);
      const page = await backend.listCodebases({
        ...(ownerId === undefined ? {} : { ownerId }),
        ...(req.pageSize === 0 ? {} : { pageSize: req.pageSize }),
        ...(pageToken === undefined ? {} : { pageToken }),
      });
      return { codebases: page.items.map(codebaseToProto), nextPageToken: page.nextPageToken ?? '' };
    }),
    deleteCodebase: unary(context, 'DeleteCodebase', async (req) => {
      await backend.deleteCodebase(requestId('codebase', 'codebase_id', req.codebaseId));
      return {};
    }),
    uploadFiles: clientStream(context, 'UploadFiles', (call, signal) => upload(backend, call, signal)),
    downloadFile: serverStream(context, 'DownloadFile', async (req, signal, call) => {
      const id = requestId('codebase', 'codebase_id', req.codebaseId);
      if (req.filePath === '') throw new InvalidArgumentError('file_path is required');
      const { stream } = await backend.downloadFile(id, codebasePath(req.filePath));
      // Back-pressure (paced-call.ts): a slow client holds the file read, not the server's memory; one
      // that reads nothing for the stall time has the call ended.
      const out = pacedCall(call, { streams: context.streams, signal, streamBytes: DOWNLOAD_CHUNK_BYTES });
      try {
        for await (const chunk of stream as AsyncIterable<Buffer>) {
          for (let at = 0; at < chunk.length; at += DOWNLOAD_CHUNK_BYTES) {
            if (signal.aborted) return;
            const piece = chunk.subarray(at, at + DOWNLOAD_CHUNK_BYTES);
            await out.send({ data: piece }, piece.length);
            if (out.stalled.aborted) throw out.stalled.reason;
          }
        }
      } finally {
        out.close();
        stream.destroy();
      }
    }),
    listFiles: unary(context, 'ListFiles', async (req) => {
      const id = requestId('codebase', 'codebase_id', req.codebaseId);
      const files = await backend.listFiles(id, { path: codebasePath(req.path), recursive: req.recursive });
      return { files: files.map(fileToProto) };
    }),
  };
}

/**
 * One file from a client stream. The first message must be the metadata; the data chunks that follow go
 * straight to the backend's atomic upload (temp file + rename), so a stream that breaks the rules, fails
 * half-way or is cancelled by the client leaves the codebase as it was.
 */
async function upload(
  backend: Backend,
  call: ServerReadableStream<UploadChunk, UploadResult>,
  signal: AbortSignal,
): Promise<UploadResult> {
  const messages = call[Symbol.asyncIterator]() as AsyncIterator<UploadChunk>;
  const first = await messages.next();
  if (first.done === true)
    throw new InvalidArgumentError('no metadata received: send UploadChunk.metadata first');
  if (first.value.content?.$case !== 'metadata') {
    throw new InvalidArgumentError('metadata must be sent first: the first UploadChunk must carry metadata');
  }
  const meta: UploadChunk_Metadata = first.value.content.value;
  const id = requestId('codebase', 'metadata.codebase_id', meta.codebaseId);
  if (meta.filePath === '') throw new InvalidArgumentError('metadata.file_path is required');
  const path = codebasePath(meta.filePath);
  const md5 = createHash('md5');
  let size = 0;
  async function* data(): AsyncGenerator<Uint8Array> {
    for (;;) {
      const next = await messages.next();
      if (next.done === true) break;
      const content = next.value.content;
      if (content?.$case === 'metadata') {
        throw new InvalidArgumentError('metadata already received: one UploadFiles call uploads one file');
      }
      if (content === undefined || content.value.length === 0) continue;
      md5.update(content.value);
      size += content.value.length;
      yield content.value;
    }
    // A client's cancel (RST_STREAM) first ends the message stream as a normal end would, and grpc-js
    // reports the cancel only from the stream's close, a few ticks later: let those run before
    // taking the end for a complete upload (the backend checks the signal again before the rename).
    await new Promise((done) => setImmediate(done));
    if (signal.aborted) {
      throw new CancelledError(`the upload of ${meta.filePath} was cancelled; nothing was written`);
    }
    // The declared size is optional (0); when given, a short or long stream is a broken upload.
    if (meta.totalSize > 0 && meta.totalSize !== size) {
      throw new InvalidArgumentError(
        `metadata.total_size is ${meta.totalSize} but ${size} bytes arrived; nothing was written`,
      );
    }
  }
  await backend.uploadFile(id, path, data(), { signal });
  return { codebaseId: id, filePath: meta.filePath, size, checksum: md5.digest('hex') };
}
