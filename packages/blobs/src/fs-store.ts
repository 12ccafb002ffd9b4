// The filesystem backend: a directory every node mounts (NFS, a cluster filesystem, or a local disk for
// one host). A blob is `<root>/sha256/<first two hex>/<digest>`, mode 0444. A put writes a temporary file
// under `<root>/tmp`, hashes while writing, fsyncs it, and renames it into place (then fsyncs the
// directory), so a reader sees the whole blob or none; rename is atomic on NFS too. A get hashes while
// reading and fails at the end on a mismatch: the directory may be writable by more than this process.
import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import {
  chmod,
  lstat,
  lutimes,
  mkdir,
  open,
  readdir,
  rename,
  stat,
  unlink,
  type FileHandle,
} from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, pipeline, type Readable } from 'node:stream';
import { parseDigest, sha256, isDigest, type Digest } from './digest.js';
import { blobError } from './errors.js';
import type { BlobStore, PutOptions, PutResult } from './store.js';

/** Unreferenced blobs younger than this survive a sweep (a put whose reference is not recorded yet). */
export const DEFAULT_SWEEP_GRACE_MS = 60 * 60 * 1000;

export class FsBlobStore implements BlobStore {
  private constructor(readonly root: string) {}

  /** The store in `root`, whose `sha256/` and `tmp/` are made when missing. */
  static async open(root: string): Promise<FsBlobStore> {
    await mkdir(join(root, 'sha256'), { recursive: true, mode: 0o755 });
    await mkdir(join(root, 'tmp'), { recursive: true, mode: 0o700 });
    return new FsBlobStore(root);
  }

  #dir(digest: Digest): string {
    return join(this.root, 'sha256', digest.slice(0, 2));
  }

  #path(digest: Digest): string {
    return join(this.#dir(digest), digest);
  }

  async put(
    source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    options: PutOptions = {},
  ): Promise<PutResult> {
    const tmp = join(this.root, 'tmp', `${randomUUID()}.part`);
    const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    let closed = false;
    try {
      const hash = sha256();
      let size = 0;
      for await (const chunk of source) {
        size += chunk.byteLength;
        if (options.maxBytes !== undefined && size > options.maxBytes) {
          throw blobError('too-large', `blob larger than ${options.maxBytes} bytes`, {
            maxBytes: options.maxBytes,
          });
        }
        hash.update(chunk);
        await writeAll(fh, chunk);
      }
      const digest = hash.digest('hex') as Digest;
      if (options.expected !== undefined && digest !== options.expected) {
        throw blobError('digest-mismatch', `blob content hashes to ${digest}, not ${options.expected}`, {
          expected: options.expected,
          actual: digest,
        });
      }
      await fh.sync();
      await fh.close();
      closed = true;
      await chmod(tmp, 0o444);
      await mkdir(this.#dir(digest), { recursive: true, mode: 0o755 });
      // Over an existing blob this swaps in identical bytes (and heals a damaged one).
      await rename(tmp, this.#path(digest));
      await syncDir(this.#dir(digest));
      return { digest, size };
    } catch (err) {
      if (!closed) await fh.close().catch(() => undefined);
      await unlink(tmp).catch(() => undefined);
      throw err;
    }
  }

  async putFile(path: string, options: PutOptions = {}): Promise<PutResult> {
    const fh = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw blobError('special-file', `${path} is not a regular file`, { path });
      // A snapshot of a codebase mostly finds its files stored already: hash first, and write (and
      // fsync) only what is missing. A blob found is touched so a sweep's grace counts from now.
      if (options.maxBytes === undefined || st.size <= options.maxBytes) {
        const hash = sha256();
        let size = 0;
        for await (const chunk of fh.createReadStream({
          autoClose: false,
          start: 0,
        }) as AsyncIterable<Buffer>) {
          hash.update(chunk);
          size += chunk.byteLength;
        }
        const digest = hash.digest('hex') as Digest;
        if (options.expected === undefined || options.expected === digest) {
          const now = new Date();
          const found = await lutimes(this.#path(digest), now, now).then(() => true, ifMissing(false));
          if (found && (await this.size(digest)) === size) return { digest, size };
        }
      }
      return await this.put(fh.createReadStream({ autoClose: false, start: 0 }), options);
    } finally {
      await fh.close();
    }
  }

  async has(digest: Digest): Promise<boolean> {
    return (await this.size(digest)) !== undefined;
  }

  async size(digest: Digest): Promise<number | undefined> {
    const st = await lstat(this.#path(parseDigest(digest))).catch(ifMissing(undefined));
    return st?.isFile() === true ? st.size : undefined;
  }

  async get(digest: Digest): Promise<Readable> {
    parseDigest(digest);
    const fh = await open(this.#path(digest), constants.O_RDONLY | constants.O_NOFOLLOW).catch(
      (err: unknown) => {
        if (errnoOf(err) === 'ENOENT') throw blobError('not-found', `no blob ${digest}`, { digest });
        if (errnoOf(err) === 'ELOOP') {
          throw blobError('digest-mismatch', `blob ${digest} is a symlink`, { digest });
        }
        throw err;
      },
    );
    return pipeline(fh.createReadStream(), verifier(digest), () => undefined);
  }

  async *list(): AsyncIterable<Digest> {
    const top = join(this.root, 'sha256');
    for (const prefix of await readdir(top)) {
      if (!/^[0-9a-f]{2}$/.test(prefix)) continue;
      for (const name of await readdir(join(top, prefix)).catch(ifMissing([] as string[]))) {
        if (isDigest(name) && name.startsWith(prefix)) yield name;
      }
    }
  }

  async sweep(
    referenced: ReadonlySet<string>,
    options: { readonly graceMs?: number } = {},
  ): Promise<Digest[]> {
    const graceMs = options.graceMs ?? DEFAULT_SWEEP_GRACE_MS;
    const deleted: Digest[] = [];
    for await (const digest of this.list()) {
      if (referenced.has(digest)) continue;
      const st = await stat(this.#path(digest)).catch(ifMissing(undefined));
      if (st === undefined || Date.now() - st.mtimeMs < graceMs) continue;
      await unlink(this.#path(digest)).catch(ifMissing(undefined));
      deleted.push(digest);
    }
    return deleted;
  }
}

/** A pass-through that hashes and fails at the end when the bytes are not `digest`'s. */
export function verifier(digest: Digest): Transform {
  const hash = sha256();
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      hash.update(chunk);
      callback(null, chunk);
    },
    flush(callback) {
      const actual = hash.digest('hex');
      callback(
        actual === digest
          ? null
          : blobError('digest-mismatch', `blob ${digest} holds bytes that hash to ${actual}`, {
              digest,
              actual,
            }),
      );
    },
  });
}

async function writeAll(fh: FileHandle, chunk: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < chunk.byteLength) {
    const { bytesWritten } = await fh.write(chunk, offset, chunk.byteLength - offset);
    offset += bytesWritten;
  }
}

/** fsync of a directory: the rename into it survives a crash of the host. */
export async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

export function errnoOf(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | null)?.code;
}

export function ifMissing<T>(value: T): (err: unknown) => T {
  return (err) => {
    if (errnoOf(err) === 'ENOENT') return value;
    throw err;
  };
}
