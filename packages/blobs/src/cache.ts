// The per-node cache: snapshots materialised as directories for the FUSE worker to use as a sandbox's
// lower tree. Files come from a node-local content cache (`objects/`), each fetched from the store once,
// verified against its digest and size before it is renamed in; a snapshot's tree is hard links to those
// objects, built in `tmp/` and renamed to `snapshots/<id>` whole. Builds and evictions take turns (one
// lock), and concurrent asks for one snapshot share one build. The bound is on the objects' bytes: past
// it, the least recently used snapshots no lease holds are removed, then objects no tree links.
// Objects are not fsynced one by one (700 fsyncs made a cold build 8 times slower than `cp -a`): what
// was written survives a crash of the process in the page cache, and a crash of the host changes its boot
// id, on which the cache drops every object and tree it holds. One process owns a cache directory (the
// node agent); it is root-only.
import { randomUUID } from 'node:crypto';
import {
  chmod,
  mkdir,
  readFile,
  readdir,
  rename,
  rm,
  stat,
  unlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { parseDigest, isDigest, type Digest } from './digest.js';
import { errnoOf, ifMissing } from './fs-store.js';
import type { Manifest } from './manifest.js';
import { buildTree, objectName } from './materialise.js';
import { copyBlobToFile } from './read.js';
import { readManifest } from './snapshot.js';
import type { BlobReader } from './store.js';

export interface NodeCacheOptions {
  /** The cache's directory (made 0700 when missing). */
  readonly root: string;
  /** Where blobs come from: the shared directory (FsBlobStore) or the API tier (HttpBlobStore). */
  readonly store: BlobReader;
  /** Bytes of cached objects past which unleased snapshots are evicted, least recently used first. */
  readonly maxBytes: number;
}

/** A materialised snapshot in use; eviction leaves it alone until every lease on it is released. */
export interface SnapshotLease {
  readonly snapshotId: Digest;
  /** The tree's directory. Nothing may write in it: its files are links to the shared cache objects. */
  readonly path: string;
  release(): void;
}

export interface CacheStats {
  readonly objectBytes: number;
  readonly snapshots: number;
  readonly leased: number;
  /** Snapshot builds done since open (a build shared by concurrent asks counts once). */
  readonly builds: number;
}

export class NodeBlobCache {
  readonly #leases = new Map<Digest, number>();
  readonly #lastUsed = new Map<Digest, number>();
  readonly #building = new Map<Digest, Promise<void>>();
  #queue: Promise<unknown> = Promise.resolve();
  #objectBytes = 0;
  #builds = 0;

  private constructor(private readonly options: NodeCacheOptions) {}

  /** Opens (or makes) the cache: drops what an interrupted build left, reads what is cached. */
  static async open(options: NodeCacheOptions): Promise<NodeBlobCache> {
    await mkdir(options.root, { recursive: true, mode: 0o700 });
    await chmod(options.root, 0o700);
    const cache = new NodeBlobCache(options);
    await removeTree(cache.#dir('tmp'));
    await dropAfterReboot(options.root);
    for (const sub of ['tmp', 'objects', 'snapshots'] as const)
      await mkdir(cache.#dir(sub), { recursive: true, mode: 0o700 });
    for (const name of await readdir(cache.#dir('snapshots'))) {
      if (isDigest(name)) cache.#lastUsed.set(name, (await stat(cache.#snapshotDir(name))).mtimeMs);
    }
    for (const name of await readdir(cache.#dir('objects'))) {
      cache.#objectBytes += (await stat(join(cache.#dir('objects'), name))).size;
    }
    return cache;
  }

  #dir(sub: 'tmp' | 'objects' | 'snapshots'): string {
    return join(this.options.root, sub);
  }

  #snapshotDir(id: Digest): string {
    return join(this.#dir('snapshots'), id);
  }

  /** The snapshot's tree, built (or found) and leased; the lease is released when its user is done. */
  async materialise(snapshotId: Digest): Promise<SnapshotLease> {
    const id = parseDigest(snapshotId, 'snapshotId');
    this.#leases.set(id, (this.#leases.get(id) ?? 0) + 1);
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      const left = (this.#leases.get(id) ?? 1) - 1;
      if (left > 0) this.#leases.set(id, left);
      else this.#leases.delete(id);
      this.#lastUsed.set(id, Date.now());
    };
    try {
      let building = this.#building.get(id);
      if (building === undefined) {
        building = this.#locked(() => this.#ensure(id)).finally(() => this.#building.delete(id));
        this.#building.set(id, building);
      }
      await building;
      const now = new Date();
      this.#lastUsed.set(id, now.getTime());
      await utimes(this.#snapshotDir(id), now, now);
    } catch (err) {
      release();
      throw err;
    }
    return { snapshotId: id, path: this.#snapshotDir(id), release };
  }

  stats(): CacheStats {
    return {
      objectBytes: this.#objectBytes,
      snapshots: this.#lastUsed.size,
      leased: this.#leases.size,
      builds: this.#builds,
    };
  }

  /** Evicts until the objects fit the bound (or only leased snapshots are left). */
  evict(): Promise<Digest[]> {
    return this.#locked(() => this.#evict());
  }

  #locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #ensure(id: Digest): Promise<void> {
    const present = await stat(this.#snapshotDir(id)).catch(ifMissing(undefined));
    if (present?.isDirectory() !== true) {
      const manifest = await readManifest(this.options.store, id);
      await this.#fetchObjects(manifest);
      const tmp = join(this.#dir('tmp'), `${randomUUID()}.tree`);
      await mkdir(tmp, { mode: 0o700 });
      try {
        await buildTree(manifest, this.#dir('objects'), tmp);
        await rename(tmp, this.#snapshotDir(id));
      } catch (err) {
        await removeTree(tmp);
        throw err;
      }
      this.#builds += 1;
      this.#lastUsed.set(id, Date.now());
      await this.#evict();
    }
  }

  async #fetchObjects(manifest: Manifest): Promise<void> {
    const objects = this.#dir('objects');
    const seen = new Set<string>();
    for (const entry of manifest.entries) {
      if (entry.type !== 'file') continue;
      const name = objectName(entry.digest, entry.mode);
      if (seen.has(name)) continue;
      seen.add(name);
      const st = await stat(join(objects, name)).catch(ifMissing(undefined));
      if (st !== undefined) continue;
      const tmp = join(this.#dir('tmp'), `${randomUUID()}.obj`);
      await copyBlobToFile(this.options.store, entry.digest, tmp, { size: entry.size, fsync: false });
      try {
        await chmod(tmp, entry.mode);
        await rename(tmp, join(objects, name));
      } catch (err) {
        await unlink(tmp).catch(() => undefined);
        throw err;
      }
      this.#objectBytes += entry.size;
    }
  }

  async #evict(): Promise<Digest[]> {
    const evicted: Digest[] = [];
    if (this.#objectBytes <= this.options.maxBytes) return evicted;
    await this.#dropUnlinkedObjects();
    while (this.#objectBytes > this.options.maxBytes) {
      const victim = [...this.#lastUsed]
        .filter(([id]) => !this.#leases.has(id))
        .sort((a, b) => a[1] - b[1])[0]?.[0];
      if (victim === undefined) break;
      this.#lastUsed.delete(victim);
      await removeTree(this.#snapshotDir(victim));
      evicted.push(victim);
      await this.#dropUnlinkedObjects();
    }
    return evicted;
  }

  /** Objects no tree links (one link: the cache's own name) are freed. */
  async #dropUnlinkedObjects(): Promise<void> {
    const objects = this.#dir('objects');
    for (const name of await readdir(objects)) {
      const st = await stat(join(objects, name)).catch(ifMissing(undefined));
      if (st === undefined || st.nlink > 1) continue;
      await unlink(join(objects, name)).catch(ifMissing(undefined));
      this.#objectBytes -= st.size;
    }
  }
}

/** The host's boot id: it changes when the host restarts, after which unsynced objects may be torn. */
const BOOT_ID = '/proc/sys/kernel/random/boot_id';

async function dropAfterReboot(root: string): Promise<void> {
  const current = (await readFile(BOOT_ID, 'utf8')).trim();
  const recorded = await readFile(join(root, 'boot-id'), 'utf8').catch(ifMissing(''));
  if (recorded.trim() === current) return;
  for (const sub of ['objects', 'snapshots']) await removeTree(join(root, sub));
  await writeFile(join(root, 'boot-id'), `${current}\n`, { mode: 0o600 });
}

/** Removes a tree whose directories may be read-only (their modes came from the manifest). */
async function removeTree(dir: string): Promise<void> {
  try {
    await rm(dir, { recursive: true, force: true });
  } catch (err) {
    if (errnoOf(err) !== 'EACCES' && errnoOf(err) !== 'EPERM') throw err;
    await makeWritable(dir);
    await rm(dir, { recursive: true, force: true });
  }
}

async function makeWritable(dir: string): Promise<void> {
  await chmod(dir, 0o700);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) await makeWritable(join(dir, entry.name));
  }
}
