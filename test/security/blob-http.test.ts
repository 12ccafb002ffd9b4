// Attacks on the blob store's HTTP backend. On serve's side (a real `agentfense serve --blobs`): a client
// without the node agents' token reads nothing (401, and 403 for the API token), and a "digest" that is a
// path (`../`, encoded or not) or names a symlink planted in the store reads nothing either. On the node's
// side (a node cache reading through HttpBlobStore from a hostile server): substituted bytes, for the
// manifest or a file, are refused and nothing of them is kept; an endless answer is cut off at the bound.
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  FsBlobStore,
  HttpBlobStore,
  NodeBlobCache,
  blobErrorReason,
  snapshotDirectory,
  type Digest,
} from '@agentfense/blobs';
import { launchServer, rawRequest, stopAndCheck, tokenFile, type Served } from '../helpers/http-fixture.js';

const NODE_TOKEN = randomBytes(24).toString('hex');
const reasonOf = (p: Promise<unknown>): Promise<string | undefined> =>
  p.then(
    () => 'resolved',
    (err: unknown) => blobErrorReason(err) ?? String(err),
  );

let dir: string;
let store: FsBlobStore;
let snapshotId: Digest;
let fileDigest: Digest;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'af-blob-http-'));
  store = await FsBlobStore.open(join(dir, 'store'));
  await mkdir(join(dir, 'tree'));
  await writeFile(join(dir, 'tree', 'app.js'), 'console.log("the real code")\n');
  snapshotId = (await snapshotDirectory(store, join(dir, 'tree'))).snapshotId;
  fileDigest = (await store.putFile(join(dir, 'tree', 'app.js'))).digest;
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('serve: who may read blobs, and which', () => {
  let served: Served;

  beforeAll(async () => {
    const { file } = await tokenFile(dir, NODE_TOKEN);
    served = await launchServer(
      ['--blobs', join(dir, 'store'), '--node-agent-token-file', file],
      join(dir, 'data'),
    );
  });

  afterAll(async () => {
    await stopAndCheck(served);
  });

  const get = async (path: string, token?: string) => {
    const res = await fetch(`${served.url}${path}`, {
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    });
    return { status: res.status, headers: res.headers, text: await res.text() };
  };

  it('answers only the node agents token: none or a wrong one is 401, the API token 403', async () => {
    const path = `/v1/blobs/${fileDigest}`;
    const none = await get(path);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect(none.text).not.toContain('the real code');
    expect((await get(path, `${NODE_TOKEN}x`)).status).toBe(401);
    expect((await get(path, NODE_TOKEN.slice(0, -1))).status).toBe(401);
    const api = await get(path, served.token);
    expect(api.status).toBe(403);
    expect(api.text).toContain("node agents' token");
    expect(api.text).not.toContain('the real code');
    const node = await get(path, NODE_TOKEN);
    expect(node.status).toBe(200);
    expect(node.text).toBe('console.log("the real code")\n');
    // A cache given a token serve refuses says so (denied), rather than "not found".
    const wrong = new HttpBlobStore({ url: served.url, token: served.token ?? '' });
    const cache = await NodeBlobCache.open({
      root: join(dir, 'cache-denied'),
      store: wrong,
      maxBytes: 1 << 20,
    });
    expect(await reasonOf(cache.materialise(snapshotId))).toBe('denied');
  });

  it('refuses a digest that is a path with 400, and serves no symlink planted in the store', async () => {
    const headers = { authorization: `Bearer ${NODE_TOKEN}` };
    for (const path of [
      '/v1/blobs/..%2F..%2Fdata%2Fapi-token',
      '/v1/blobs/%2e%2e%2f%2e%2e%2fdata%2fapi-token',
      '/v1/blobs/..',
      `/v1/blobs/${fileDigest.toUpperCase()}`,
      `/v1/blobs/${fileDigest}%00`,
    ]) {
      const answer = await rawRequest(served.url, 'GET', path, undefined, headers);
      expect(answer.status, path).toBe(400);
      expect(answer.json.message, path).toContain('64 lowercase hex characters, nothing else (no path)');
    }
    // Unencoded `../` is no blob route at all: the API's token check refuses it.
    const climb = await rawRequest(served.url, 'GET', '/v1/blobs/../../data/api-token', undefined, headers);
    expect(climb.status).toBe(401);
    // A blob name that is a symlink to the API token (the store directory is shared): not served.
    const planted = 'ab'.padEnd(64, 'c');
    await mkdir(join(dir, 'store', 'sha256', 'ab'), { recursive: true });
    await symlink(join(dir, 'data', 'api-token'), join(dir, 'store', 'sha256', 'ab', planted));
    const answer = await get(`/v1/blobs/${planted}`, NODE_TOKEN);
    expect(answer.status).toBe(404);
    expect(answer.text).not.toContain(served.token ?? 'no token');
  });
});

describe('node: a hostile blob server', () => {
  const servers: Server[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) {
      s.closeAllConnections();
      await new Promise((resolve) => s.close(resolve));
    }
  });

  /** A server answering from the real store, except where `answer` says otherwise. */
  async function hostile(answer: (digest: string, res: ServerResponse) => boolean) {
    const server = createServer((req, res) => {
      const digest = (req.url ?? '').split('/').pop() ?? '';
      if (answer(digest, res)) return;
      void store.get(digest as Digest).then(
        (s) => s.pipe(res),
        () => res.writeHead(404).end(),
      );
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new HttpBlobStore({
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      token: NODE_TOKEN,
    });
  }

  async function cacheOver(http: HttpBlobStore, name: string) {
    const root = join(dir, name);
    return { root, cache: await NodeBlobCache.open({ root, store: http, maxBytes: 1 << 20 }) };
  }

  it('refuses a file blob whose bytes are not its digest, and keeps none of them', async () => {
    // As long as the real file, so only its hash can tell.
    const evil = Buffer.from('console.log("evil code!!!!")\n');
    expect(evil.length).toBe(Buffer.byteLength('console.log("the real code")\n'));
    const http = await hostile((digest, res) => {
      if (digest !== fileDigest) return false;
      res.writeHead(200, { 'content-length': evil.length }).end(evil);
      return true;
    });
    const { root, cache } = await cacheOver(http, 'cache-file');
    expect(await reasonOf(cache.materialise(snapshotId))).toBe('digest-mismatch');
    expect(await readdir(join(root, 'objects'))).toEqual([]);
    expect(await readdir(join(root, 'snapshots'))).toEqual([]);
  });

  it('refuses a substituted manifest (one listing another file)', async () => {
    const other = join(dir, 'other');
    await mkdir(other);
    await writeFile(join(other, 'app.js'), 'evil\n');
    const otherId = (await snapshotDirectory(store, other)).snapshotId;
    const http = await hostile((digest, res) => {
      if (digest !== snapshotId) return false;
      void store.get(otherId).then((s) => s.pipe(res));
      return true;
    });
    const { root, cache } = await cacheOver(http, 'cache-manifest');
    expect(await reasonOf(cache.materialise(snapshotId))).toBe('digest-mismatch');
    expect(await readdir(join(root, 'objects'))).toEqual([]);
    expect(await readdir(join(root, 'snapshots'))).toEqual([]);
  });

  it('cuts off an endless answer for a file at the size its manifest lists', async () => {
    let written = 0;
    const http = await hostile((digest, res) => {
      if (digest !== fileDigest) return false;
      res.writeHead(200);
      const more = (): void => {
        while (written < 256 << 20 && res.write(Buffer.alloc(65536, 0x61))) written += 65536;
        if (written < 256 << 20) res.once('drain', more);
      };
      more();
      return true;
    });
    const { root, cache } = await cacheOver(http, 'cache-endless');
    expect(await reasonOf(cache.materialise(snapshotId))).toBe('too-large');
    // The file's listed size plus what socket buffers held: far from the 256 MiB on offer.
    expect(written).toBeLessThan(16 << 20);
    expect(await readdir(join(root, 'objects'))).toEqual([]);
    expect(await readdir(join(root, 'snapshots'))).toEqual([]);
  });
});
