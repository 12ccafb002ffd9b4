// The HTTP backend's read side against a real local HTTP server: blobs come back verified, the token goes
// in the Authorization header, and every way a server can fail (404, 401, a redirect, silence, a short
// or oversize answer, wrong bytes) is one closed error, never data.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  FsBlobStore,
  HttpBlobStore,
  NodeBlobCache,
  blobErrorReason,
  readBlob,
  snapshotDirectory,
  type Digest,
} from '../src/index.js';
import { scratch, writeTree } from './helpers.js';

const TOKEN = 'node-token-0123456789abcdef0123456789';
const sha = (s: string): Digest => createHash('sha256').update(s).digest('hex') as Digest;
const reasonOf = async (p: Promise<unknown>): Promise<string | undefined> =>
  p.then(
    () => 'resolved',
    (err: unknown) => blobErrorReason(err) ?? String(err),
  );

type Handler = (req: IncomingMessage, res: ServerResponse) => void;
const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

async function serve(handler: Handler): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A server answering blobs of `store` as serve does: token checked, digest from the path. */
async function storeServer(store: FsBlobStore, seen: string[] = []): Promise<string> {
  return serve((req, res) => {
    seen.push(`${req.method ?? ''} ${req.url ?? ''} ${req.headers.authorization ?? ''}`);
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(401).end('{"message":"missing or invalid bearer token"}');
      return;
    }
    const digest = (req.url ?? '').replace('/v1/blobs/', '') as Digest;
    void store.size(digest).then(async (size) => {
      if (size === undefined) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-length': size });
      if (req.method === 'HEAD') res.end();
      else (await store.get(digest)).pipe(res);
    });
  });
}

describe('HttpBlobStore', () => {
  it('reads blobs with the token, and a snapshot materialises through it', async () => {
    const store = await FsBlobStore.open(await scratch());
    const tree = await scratch();
    await writeTree(tree, { 'a.txt': 'alpha', 'src/b.ts': 'export const b = 1;\n' });
    const { snapshotId } = await snapshotDirectory(store, tree);
    const seen: string[] = [];
    const http = new HttpBlobStore({ url: await storeServer(store, seen), token: TOKEN });

    expect(await http.size(sha('alpha'))).toBe(5);
    expect(await http.has(sha('alpha'))).toBe(true);
    expect(await http.has(sha('absent'))).toBe(false);
    expect((await readBlob(http, sha('alpha'), 100)).toString()).toBe('alpha');

    const cache = await NodeBlobCache.open({ root: await scratch(), store: http, maxBytes: 1 << 20 });
    const lease = await cache.materialise(snapshotId);
    expect(await readFile(join(lease.path, 'src/b.ts'), 'utf8')).toBe('export const b = 1;\n');
    lease.release();
    expect(seen.every((line) => line.endsWith(`Bearer ${TOKEN}`))).toBe(true);
    expect(seen.some((line) => line.startsWith(`GET /v1/blobs/${snapshotId}`))).toBe(true);
  });

  it('reads a chunked answer (no Content-Length) to its end', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200);
      res.write('hello ');
      res.end('world');
    });
    const http = new HttpBlobStore({ url, token: TOKEN });
    expect((await readBlob(http, sha('hello world'), 100)).toString()).toBe('hello world');
  });

  it('keeps a path prefix of the URL', async () => {
    const seen: string[] = [];
    const url = await serve((req, res) => {
      seen.push(req.url ?? '');
      res.writeHead(404).end();
    });
    const http = new HttpBlobStore({ url: `${url}/agentfense/`, token: TOKEN });
    expect(await reasonOf(http.get(sha('x')))).toBe('not-found');
    expect(seen).toEqual([`/agentfense/v1/blobs/${sha('x')}`]);
  });

  it('refuses a malformed digest before any request', async () => {
    const seen: string[] = [];
    const url = await serve((req, res) => {
      seen.push(req.url ?? '');
      res.end();
    });
    const http = new HttpBlobStore({ url, token: TOKEN });
    for (const bad of ['../../etc/passwd', `${sha('x')}/..`, sha('x').toUpperCase(), '']) {
      expect(await reasonOf(http.get(bad as Digest))).toBe('invalid-digest');
    }
    expect(seen).toEqual([]);
  });

  it('says denied for a refused token, without echoing the token', async () => {
    const url = await serve((req, res) => {
      res.writeHead(403).end(JSON.stringify({ message: `bad token ${req.headers.authorization ?? ''}` }));
    });
    const err = await new HttpBlobStore({ url, token: TOKEN }).get(sha('x')).catch((e: unknown) => e);
    expect(blobErrorReason(err)).toBe('denied');
    expect(String((err as Error).message)).toContain('HTTP 403');
    expect(String((err as Error).message)).not.toContain(TOKEN);
  });

  it('does not follow a redirect', async () => {
    const seen: string[] = [];
    const elsewhere = await serve((req, res) => {
      seen.push(req.headers.authorization ?? '');
      res.end('x');
    });
    const url = await serve((_req, res) => {
      res.writeHead(302, { location: `${elsewhere}/x` }).end();
    });
    expect(await reasonOf(new HttpBlobStore({ url, token: TOKEN }).get(sha('x')))).toBe('unavailable');
    expect(seen).toEqual([]);
  });

  it('times out a silent server', async () => {
    const url = await serve(() => undefined);
    const http = new HttpBlobStore({ url, token: TOKEN, timeoutMs: 200 });
    const err = await http.get(sha('x')).catch((e: unknown) => e);
    expect(blobErrorReason(err)).toBe('unavailable');
    expect(String((err as Error).message)).toContain('silent for 200 ms');
  });

  it('times out a server that stops in the middle of a blob', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': 10 });
      res.write('abc');
    });
    const http = new HttpBlobStore({ url, token: TOKEN, timeoutMs: 200 });
    const err = await readBlob(http, sha('abcdefghij'), 100).catch((e: unknown) => e);
    expect(blobErrorReason(err)).toBe('unavailable');
    expect(String((err as Error).message)).toContain('silent for 200 ms');
  });

  it('refuses an answer cut short of its Content-Length', async () => {
    const url = await serve((req, res) => {
      res.writeHead(200, { 'content-length': 10 });
      res.end('abc');
      req.socket.destroy();
    });
    const http = new HttpBlobStore({ url, token: TOKEN });
    expect(await reasonOf(readBlob(http, sha('abcdefghij'), 100))).toBe('unavailable');
  });

  it('refuses a Content-Length over maxBytes before reading, and a chunked answer past it', async () => {
    let written = 0;
    const declared = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': 1 << 30 });
      res.write(Buffer.alloc(1024));
    });
    const http = new HttpBlobStore({ url: declared, token: TOKEN, maxBytes: 4096 });
    expect(await reasonOf(http.get(sha('x')))).toBe('too-large');
    const endless = await serve((_req, res) => {
      res.writeHead(200);
      const more = (): void => {
        while (written < 64 << 20 && res.write(Buffer.alloc(16384))) written += 16384;
        if (written < 64 << 20) res.once('drain', more);
      };
      more();
    });
    const chunked = new HttpBlobStore({ url: endless, token: TOKEN, maxBytes: 65536 });
    expect(await reasonOf(readBlob(chunked, sha('x'), 1 << 30))).toBe('too-large');
    // The reader stopped near the bound: far less than the server would have sent.
    expect(written).toBeLessThan(16 << 20);
  });

  it('refuses bytes that are not the digest asked for', async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': 5 }).end('bravo');
    });
    const http = new HttpBlobStore({ url, token: TOKEN });
    expect(await reasonOf(readBlob(http, sha('alpha'), 100))).toBe('digest-mismatch');
  });

  it('takes http and https URLs only, without credentials', () => {
    for (const url of ['ftp://h/x', 'not a url', 'http://u:p@h/', 'http://h/?q=1']) {
      expect(() => new HttpBlobStore({ url, token: TOKEN })).toThrow(/blob store URL/);
    }
  });
});
