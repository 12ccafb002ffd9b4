// Codebases (contract §6): stored ones live under the data directory and take streamed uploads; linked ones
// are a user's directory used in place (nothing copied). Metadata is in the database.
import { randomUUID } from 'node:crypto';
import { realpath, rm, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { CancelledError, InvalidArgumentError, WrongStateError } from '@agentfense/protocol';
import type { DirIdentity } from '@agentfense/protocol';
import { identityOf, openPinnedDir } from '@agentfense/fuse-worker';
import { newId, validateId } from '../ids.js';
import { ensurePrivateDir } from '../paths.js';
import type { DataLayout } from '../paths.js';
import { codebaseInfo, formatIdentity } from '../store/codebases.js';
import type { CodebaseRow, CodebaseStore } from '../store/codebases.js';
import type { SandboxStore } from '../store/sandboxes.js';
import {
  UPLOAD_TEMP_PREFIX,
  createTempIn,
  listDir,
  lstatIn,
  openDirChain,
  openFileIn,
  openSubdir,
  renameIn,
  unlinkIn,
} from './safe-fs.js';
import { FileChunks } from './file-chunks.js';
import { openCodebaseRoot } from './roots.js';
import type { OpenedRoot } from './roots.js';
import type { CodebaseInfo, CodebaseVisibility, FileEntry } from './types.js';
import { splitCodebasePath } from './upload-path.js';

/** Default cap on one uploaded file: 1 GiB. */
export const DEFAULT_MAX_UPLOAD_BYTES = 1024 ** 3;

/** What an upload's content may be: bytes, a string, or a stream / async iterable of chunks. */
export type UploadSource = Uint8Array | string | AsyncIterable<Uint8Array | string>;

export interface UploadOptions {
  /** Cap on this file (bytes), at most the service's own. */
  readonly maxBytes?: number;
  /** Aborted (the client went away): nothing is written, even if the content seemed complete. */
  readonly signal?: AbortSignal;
}

export interface CodebaseServiceOptions {
  readonly store: CodebaseStore;
  readonly layout: DataLayout;
  readonly sandboxes: SandboxStore;
  readonly logger: Logger;
  /** Largest file an upload may write (bytes). */
  readonly maxUploadBytes?: number;
}

export class CodebaseService {
  readonly #store: CodebaseStore;
  readonly #layout: DataLayout;
  readonly #sandboxes: SandboxStore;
  readonly #logger: Logger;
  readonly #maxUploadBytes: number;

  constructor(options: CodebaseServiceOptions) {
    this.#store = options.store;
    this.#layout = options.layout;
    this.#sandboxes = options.sandboxes;
    this.#logger = options.logger.child({ component: 'codebases' });
    this.#maxUploadBytes = options.maxUploadBytes ?? DEFAULT_MAX_UPLOAD_BYTES;
  }

  /** Creates an empty stored codebase. */
  async create(options: { name: string; ownerId?: string | null }): Promise<CodebaseInfo> {
    const name = checkName(options.name);
    const id = newId('codebase');
    await ensurePrivateDir(this.#layout.codebaseDir(id));
    await ensurePrivateDir(this.#layout.codebaseFiles(id));
    const now = Date.now();
    const row: CodebaseRow = {
      id,
      name,
      owner_id: options.ownerId ?? null,
      kind: 'stored',
      host_path: null,
      host_identity: null,
      file_count: 0,
      size_bytes: 0,
      visibility: 'api',
      created_at: now,
      updated_at: now,
    };
    await this.#store.insert(row);
    this.#logger.info({ codebaseId: id }, 'codebase created');
    return this.#info(row);
  }

  /**
   * Registers an existing host directory as a codebase used in place: its real path and its identity
   * (device, inode) are recorded, and every later host-side open must find that same directory there.
   * It is local (API clients cannot reach it) unless `apiVisible`.
   */
  async link(options: {
    path: string;
    name?: string;
    ownerId?: string | null;
    apiVisible?: boolean;
  }): Promise<CodebaseInfo> {
    if (typeof options.path !== 'string' || options.path === '' || options.path.includes('\0')) {
      throw new InvalidArgumentError('a linked codebase needs a directory path');
    }
    let hostPath: string;
    try {
      hostPath = await realpath(options.path);
    } catch (err) {
      throw new InvalidArgumentError(`cannot link ${options.path}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    if (!(await stat(hostPath)).isDirectory()) {
      throw new InvalidArgumentError(`cannot link ${options.path}: not a directory`);
    }
    if (hostPath === '/' || hostPath.startsWith(this.#layout.root + '/') || hostPath === this.#layout.root) {
      throw new InvalidArgumentError(`cannot link ${hostPath}: it is / or inside the data directory`);
    }
    const identity = await linkedIdentity(options.path, hostPath);
    const id = newId('codebase');
    const now = Date.now();
    const row: CodebaseRow = {
      id,
      name: checkName(options.name ?? basename(hostPath)),
      owner_id: options.ownerId ?? null,
      kind: 'linked',
      host_path: hostPath,
      host_identity: formatIdentity(identity),
      file_count: null,
      size_bytes: null,
      visibility: options.apiVisible === true ? 'api' : 'local',
      created_at: now,
      updated_at: now,
    };
    await this.#store.insert(row);
    this.#logger.info({ codebaseId: id, hostPath }, 'codebase linked');
    return this.#info(row);
  }

  async get(id: string): Promise<CodebaseInfo> {
    return this.#info(await this.#store.get(validateId('codebase', id)));
  }

  async list(): Promise<CodebaseInfo[]> {
    return (await this.#store.list()).map((row) => this.#info(row));
  }

  /** Who may reach codebase `id` (NotFoundError when there is none). */
  async visibility(id: string): Promise<CodebaseVisibility> {
    return (await this.#store.get(validateId('codebase', id))).visibility;
  }

  /**
   * The directory a sandbox mounts as its lower layer and the identity the worker must find there,
   * checked now (a linked directory may have been removed, replaced or reached through a symlink since).
   */
  async lowerForMount(id: string): Promise<{ path: string; identity: DirIdentity | undefined }> {
    const root = await this.#openRoot(id);
    await root.handle.close();
    return { path: root.path, identity: root.identity };
  }

  /** Opens a codebase's root (roots.ts: a linked one pinned to the directory that was linked). */
  async #openRoot(id: string): Promise<OpenedRoot> {
    const row = await this.#store.get(validateId('codebase', id));
    return openCodebaseRoot(row, {
      store: this.#store,
      logger: this.#logger,
      storedPath: this.#layout.codebaseFiles(row.id),
    });
  }

  /**
   * Writes one file of a stored codebase from bytes or a stream, creating parent directories. The file
   * appears atomically: the content goes to a temporary file in the same directory, is fsynced and
   * renamed over the name only when the source ended normally and `signal` is not aborted; any failure
   * or cancellation removes the temporary file and leaves the old file. No component may be a symlink.
   */
  async upload(
    id: string,
    path: string,
    source: UploadSource,
    options: UploadOptions = {},
  ): Promise<FileEntry> {
    const row = await this.#store.get(validateId('codebase', id));
    const segments = splitCodebasePath(path);
    if (row.kind !== 'stored') {
      throw new WrongStateError(
        `codebase ${id} is linked to ${row.host_path}: it changes only through commits, not uploads`,
      );
    }
    const maxBytes = Math.min(options.maxBytes ?? this.#maxUploadBytes, this.#maxUploadBytes);
    const name = segments.at(-1) as string;
    const root = await this.#openRoot(id);
    const dir = await openDirChain(root.handle, segments.slice(0, -1), { create: true }).finally(() =>
      root.handle.close(),
    );
    try {
      const existing = await lstatIn(dir, name);
      if (existing?.isDirectory() === true) throw new InvalidArgumentError(`${path} is a directory`);
      const tempName = `${UPLOAD_TEMP_PREFIX}${randomUUID()}`;
      const temp = await createTempIn(dir, tempName);
      let size = 0;
      try {
        for await (const chunk of chunksOf(source)) {
          size += chunk.byteLength;
          if (size > maxBytes) {
            throw new InvalidArgumentError(`${path} is larger than the upload limit of ${maxBytes} bytes`, {
              details: { path, maxBytes },
            });
          }
          await temp.file.write(chunk);
        }
        await temp.file.sync();
        await temp.file.close();
        if (options.signal?.aborted === true) {
          throw new CancelledError(`the upload of ${path} was cancelled by the client; nothing was written`);
        }
        await renameIn(dir, tempName, name);
      } catch (err) {
        await temp.file.close().catch(() => undefined);
        await unlinkIn(dir, tempName);
        throw err;
      }
      const wasFile = existing?.isFile() === true;
      await this.#store.addFiles(id, wasFile ? 0 : 1, size - (wasFile ? existing.size : 0));
      this.#logger.debug({ codebaseId: id, path, size }, 'file uploaded');
      const st = await lstatIn(dir, name);
      return { path, size, isDir: false, modifiedAt: (st?.mtime ?? new Date()).toISOString() };
    } finally {
      await dir.close();
    }
  }

  /** Lists a directory of the codebase (`path` '' is the root), recursively when asked. Symlinks are listed, never followed. */
  async listFiles(id: string, options: { path?: string; recursive?: boolean } = {}): Promise<FileEntry[]> {
    const segments = splitCodebasePath(options.path ?? '', { allowRoot: true });
    const out: FileEntry[] = [];
    const walk = async (dir: Awaited<ReturnType<typeof openDirChain>>, prefix: string): Promise<void> => {
      for (const { name, stats } of await listDir(dir)) {
        if (name.startsWith(UPLOAD_TEMP_PREFIX)) continue;
        const rel = prefix === '' ? name : `${prefix}/${name}`;
        const isDir = stats.isDirectory();
        out.push({ path: rel, size: isDir ? 0 : stats.size, isDir, modifiedAt: stats.mtime.toISOString() });
        if (isDir && options.recursive === true) {
          const sub = await openSubdir(dir, name).catch(() => undefined);
          if (sub === undefined) continue; // replaced by something else meanwhile: list it, skip its content
          try {
            await walk(sub, rel);
          } finally {
            await sub.close();
          }
        }
      }
    };
    const root = await this.#openRoot(id);
    const dir = await openDirChain(root.handle, segments).finally(() => root.handle.close());
    try {
      await walk(dir, segments.join('/'));
    } finally {
      await dir.close();
    }
    return out;
  }

  /**
   * A stream of one file's content (the file must be a regular file reached without symlinks), read a
   * chunk at a time as it is consumed (file-chunks.ts).
   */
  async download(id: string, path: string): Promise<{ stream: Readable; size: number }> {
    const segments = splitCodebasePath(path);
    const root = await this.#openRoot(id);
    const dir = await openDirChain(root.handle, segments.slice(0, -1)).finally(() => root.handle.close());
    try {
      const file = await openFileIn(dir, segments.at(-1) as string, path);
      const { size } = await file.stat();
      return { stream: new FileChunks(file), size };
    } finally {
      await dir.close();
    }
  }

  /** Deletes a codebase: refused while sandboxes use it. A linked codebase's directory is never touched. */
  async delete(id: string): Promise<void> {
    const row = await this.#store.get(validateId('codebase', id));
    const users = await this.#sandboxes.countByCodebase(id);
    if (users > 0) {
      throw new WrongStateError(`codebase ${id} is used by ${users} sandbox(es); destroy them first`, {
        details: { id, sandboxes: users },
      });
    }
    await this.#store.delete(id);
    if (row.kind === 'stored') await rm(this.#layout.codebaseDir(id), { recursive: true, force: true });
    this.#logger.info({ codebaseId: id }, 'codebase deleted');
  }

  #info(row: CodebaseRow): CodebaseInfo {
    return codebaseInfo(row, this.#layout.codebaseFiles(row.id));
  }
}

/** The identity of the directory at `hostPath` (a real path: no symlink may be on the way by now). */
async function linkedIdentity(given: string, hostPath: string): Promise<DirIdentity> {
  const handle = await openPinnedDir(hostPath, { label: 'the directory' }).catch((err: unknown) => {
    throw new InvalidArgumentError(`cannot link ${given}: ${(err as Error).message}`, { cause: err });
  });
  try {
    return await identityOf(handle);
  } finally {
    await handle.close();
  }
}

function checkName(name: unknown): string {
  if (typeof name !== 'string' || name.trim() === '' || name.length > 256 || name.includes('\0')) {
    throw new InvalidArgumentError('a codebase name must be a non-empty string of at most 256 characters');
  }
  return name;
}

async function* chunksOf(source: UploadSource): AsyncIterable<Uint8Array> {
  if (typeof source === 'string') {
    yield Buffer.from(source);
  } else if (source instanceof Uint8Array) {
    yield source;
  } else {
    for await (const chunk of source) yield typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
  }
}
