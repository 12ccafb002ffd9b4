// The HTTP backend, read side: a node without a shared filesystem reads blobs from the API tier
// (`GET /v1/blobs/<digest>` on `agentfense serve`, with the node agents' token). Nothing it receives is
// trusted: the digest is checked before it becomes part of a URL, an answer longer than its
// Content-Length or than `maxBytes` is cut off, a silent server times out, a redirect is not followed
// (the token would go with it), and the bytes are hashed on the way (the readers hash them again).
import { request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { Readable, pipeline } from 'node:stream';
import { parseDigest, type Digest } from './digest.js';
import { blobError } from './errors.js';
import { verifier } from './fs-store.js';
import type { BlobReader } from './store.js';

export interface HttpBlobStoreOptions {
  /** The API tier's base URL, `http://…` or `https://…` (`/v1/blobs/<digest>` is appended). */
  readonly url: string;
  /** The bearer token the server takes for blobs (the node agents' token). Sent in one header only. */
  readonly token: string;
  /** Longest blob accepted; a larger Content-Length is refused before a byte is read. Default 4 GiB. */
  readonly maxBytes?: number;
  /** How long the server may stay silent (connecting, before its answer, between chunks). Default 30 s. */
  readonly timeoutMs?: number;
}

export const DEFAULT_HTTP_BLOB_MAX_BYTES = 4 * 1024 ** 3;
export const DEFAULT_HTTP_BLOB_TIMEOUT_MS = 30_000;
/** Most of an error answer read for its message. */
const ERROR_BODY_BYTES = 4096;

export class HttpBlobStore implements BlobReader {
  readonly #base: URL;
  readonly #token: string;
  readonly #maxBytes: number;
  readonly #timeoutMs: number;

  constructor(options: HttpBlobStoreOptions) {
    let base: URL;
    try {
      base = new URL(options.url);
    } catch {
      throw blobError('unavailable', `blob store URL ${JSON.stringify(options.url)} is not a URL`);
    }
    if (base.protocol !== 'http:' && base.protocol !== 'https:') {
      throw blobError('unavailable', `blob store URL must be http:// or https://, got ${base.protocol}`);
    }
    if (base.username !== '' || base.password !== '' || base.search !== '' || base.hash !== '') {
      throw blobError(
        'unavailable',
        'blob store URL: no credentials, query or fragment (the token is separate)',
      );
    }
    this.#base = base;
    this.#token = options.token;
    this.#maxBytes = options.maxBytes ?? DEFAULT_HTTP_BLOB_MAX_BYTES;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_HTTP_BLOB_TIMEOUT_MS;
  }

  /** The server, for messages (never with the token). */
  get url(): string {
    return this.#base.origin;
  }

  async has(digest: Digest): Promise<boolean> {
    return (await this.size(digest)) !== undefined;
  }

  async size(digest: Digest): Promise<number | undefined> {
    const { res } = await this.#request('HEAD', digest);
    res.resume();
    if (res.statusCode === 404) return undefined;
    return this.#length(res, digest) ?? undefined;
  }

  async get(digest: Digest): Promise<Readable> {
    const { res, timedOut } = await this.#request('GET', digest);
    if (res.statusCode === 404) {
      res.resume();
      throw blobError('not-found', `no blob ${digest} at ${this.url}`, { digest });
    }
    const length = this.#length(res, digest);
    const limit = length ?? this.#maxBytes;
    const where = this.url;
    async function* body(): AsyncIterable<Buffer> {
      let received = 0;
      try {
        for await (const chunk of res as AsyncIterable<Buffer>) {
          received += chunk.byteLength;
          if (received > limit) {
            throw blobError('too-large', `blob ${digest} from ${where}: more than ${limit} bytes`, {
              digest,
            });
          }
          yield chunk;
        }
      } catch (err) {
        throw timedOut() ?? asBlobError(err, `blob ${digest} from ${where}`);
      } finally {
        res.destroy();
      }
      if (length !== null && received !== length) {
        throw blobError(
          'unavailable',
          `blob ${digest} from ${where} ended after ${received} of ${length} bytes`,
          {
            digest,
          },
        );
      }
    }
    return pipeline(Readable.from(body()), verifier(digest), () => undefined);
  }

  /** The declared length, refused past maxBytes before anything is read; null without one. */
  #length(res: IncomingMessage, digest: Digest): number | null {
    const header = res.headers['content-length'];
    if (header === undefined) return null;
    const length = Number(header);
    if (!Number.isSafeInteger(length) || length < 0) {
      res.destroy();
      throw blobError(
        'unavailable',
        `blob ${digest} from ${this.url}: Content-Length ${header} is not a size`,
      );
    }
    if (length > this.#maxBytes) {
      res.destroy();
      throw blobError(
        'too-large',
        `blob ${digest} from ${this.url} is ${length} bytes, over ${this.#maxBytes}`,
        {
          digest,
          maxBytes: this.#maxBytes,
        },
      );
    }
    return length;
  }

  /**
   * One request; resolves with a 200 or 404 answer (and the timeout's error, once it fired: a body cut by
   * it then fails with that, not a bare "aborted"); every other status is an error.
   */
  #request(
    method: 'GET' | 'HEAD',
    digest: Digest,
  ): Promise<{ res: IncomingMessage; timedOut: () => Error | undefined }> {
    // Checked before it becomes part of the URL: `../` and friends never leave the node.
    const id = parseDigest(digest);
    const url = new URL(`${this.#base.pathname.replace(/\/+$/, '')}/v1/blobs/${id}`, this.#base);
    const options: RequestOptions = {
      method,
      headers: { authorization: `Bearer ${this.#token}`, accept: 'application/octet-stream' },
      timeout: this.#timeoutMs,
    };
    const what = `${method} blob ${id} from ${this.url}`;
    let timeout: Error | undefined;
    const timedOut = (): Error | undefined => timeout;
    return new Promise((resolve, reject) => {
      const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(url, options);
      req.on('timeout', () => {
        timeout = blobError('unavailable', `${what}: silent for ${this.#timeoutMs} ms`, { digest: id });
        req.destroy(timeout);
      });
      req.on('error', (err) => reject(asBlobError(err, what)));
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        if (status === 200 || status === 404) {
          resolve({ res, timedOut });
          return;
        }
        void errorMessage(res, this.#token).then((message) => {
          const detail = `${what}: HTTP ${status}${message === '' ? '' : ` (${message})`}`;
          reject(
            status === 401 || status === 403
              ? blobError('denied', `${detail}: the server refuses this node's token`, { digest: id, status })
              : status >= 300 && status < 400
                ? blobError('unavailable', `${detail}: redirects are not followed`, { digest: id, status })
                : blobError('unavailable', detail, { digest: id, status }),
          );
        });
      });
      req.end();
    });
  }
}

function asBlobError(err: unknown, what: string): Error {
  if ((err as { details?: { reason?: unknown } } | null)?.details?.reason !== undefined) return err as Error;
  return blobError('unavailable', `${what}: ${(err as Error).message}`);
}

/** The server's error message (its `message` field when JSON), short and without the token. */
async function errorMessage(res: IncomingMessage, token: string): Promise<string> {
  let text = '';
  try {
    for await (const chunk of res as AsyncIterable<Buffer>) {
      text += chunk.toString('utf8');
      if (text.length >= ERROR_BODY_BYTES) break;
    }
  } catch {
    // the status is enough
  } finally {
    res.destroy();
  }
  let message = text.slice(0, ERROR_BODY_BYTES);
  try {
    const parsed = JSON.parse(message) as { message?: unknown };
    if (typeof parsed.message === 'string') message = parsed.message;
  } catch {
    // not JSON: the text itself
  }
  return message.split(token).join('***').replace(/\s+/g, ' ').trim().slice(0, 300);
}
