// A snapshot's manifest: every entry of a codebase tree (directories, files with their digest and size,
// symlinks with their target), sorted by path, as canonical JSON. The manifest is itself a blob and its
// digest is the snapshot id, so an id pins every byte of the tree. parseManifest checks everything a
// materialiser relies on, because the manifest comes from a store the node does not have to trust.
import { parseDigest, type Digest } from './digest.js';
import { blobError } from './errors.js';
import { checkSymlinkTargets } from './symlinks.js';

export const MANIFEST_VERSION = 1;
/** Manifests larger than this are refused before they are parsed. */
export const MAX_MANIFEST_BYTES = 128 << 20;
export const MAX_ENTRIES = 1_000_000;
const MAX_PATH_BYTES = 4096;
const MAX_NAME_BYTES = 255;

export type ManifestEntry =
  | { readonly path: string; readonly type: 'dir'; readonly mode: number }
  | {
      readonly path: string;
      readonly type: 'file';
      readonly mode: number;
      readonly size: number;
      readonly digest: Digest;
    }
  | { readonly path: string; readonly type: 'symlink'; readonly target: string };

export interface Manifest {
  readonly version: typeof MANIFEST_VERSION;
  /** Sorted by path (code-unit order), each path once; a parent directory is an entry of its own. */
  readonly entries: readonly ManifestEntry[];
}

/** The canonical bytes of a manifest (fixed key order, no spaces): what its digest is taken of. */
export function encodeManifest(manifest: Manifest): Buffer {
  const entries = manifest.entries.map((e) => {
    switch (e.type) {
      case 'dir':
        return { path: e.path, type: e.type, mode: e.mode };
      case 'file':
        return { path: e.path, type: e.type, mode: e.mode, size: e.size, digest: e.digest };
      case 'symlink':
        return { path: e.path, type: e.type, target: e.target };
    }
  });
  return Buffer.from(JSON.stringify({ version: manifest.version, entries }));
}

/** Sorts entries into manifest order. */
export function sortEntries(entries: ManifestEntry[]): ManifestEntry[] {
  return entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * A manifest from its bytes, refused unless every path is a safe relative path, entries are sorted and
 * unique, every parent is a directory entry (so no entry is reached through a symlink), modes are plain
 * permission bits (no setuid, setgid or sticky), and no symlink leads out of the tree.
 */
export function parseManifest(bytes: Uint8Array): Manifest {
  if (bytes.byteLength > MAX_MANIFEST_BYTES) {
    throw blobError('too-large', `manifest larger than ${MAX_MANIFEST_BYTES} bytes`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    throw blobError('invalid-manifest', 'manifest is not JSON');
  }
  const obj = raw as { version?: unknown; entries?: unknown } | null;
  if (typeof obj !== 'object' || obj === null || obj.version !== MANIFEST_VERSION) {
    throw blobError('invalid-manifest', `manifest: an object with version ${MANIFEST_VERSION}`);
  }
  if (!Array.isArray(obj.entries) || obj.entries.length > MAX_ENTRIES) {
    throw blobError('invalid-manifest', `manifest entries: an array of at most ${MAX_ENTRIES}`);
  }
  const entries = obj.entries.map(parseEntry);
  return validateManifest({ version: MANIFEST_VERSION, entries });
}

/** The structural checks of parseManifest on a manifest built in memory (a snapshot runs them too). */
export function validateManifest(manifest: Manifest): Manifest {
  const types = new Map<string, ManifestEntry['type']>();
  let previous: string | undefined;
  for (const entry of manifest.entries) {
    if (previous !== undefined && !(previous < entry.path)) {
      throw blobError(
        'invalid-manifest',
        `manifest entries not sorted or repeated at ${JSON.stringify(entry.path)}`,
        {
          path: entry.path,
        },
      );
    }
    previous = entry.path;
    types.set(entry.path, entry.type);
  }
  for (const entry of manifest.entries) {
    const slash = entry.path.lastIndexOf('/');
    if (slash !== -1 && types.get(entry.path.slice(0, slash)) !== 'dir') {
      throw blobError(
        'invalid-manifest',
        `${JSON.stringify(entry.path)}: its parent is not a directory entry`,
        {
          path: entry.path,
        },
      );
    }
  }
  checkSymlinkTargets(manifest.entries);
  return manifest;
}

function parseEntry(raw: unknown, index: number): ManifestEntry {
  const e = raw as Record<string, unknown> | null;
  const bad = (what: string): never => {
    throw blobError('invalid-manifest', `manifest entry ${index}: ${what}`, { index });
  };
  if (typeof e !== 'object' || e === null) return bad('an object');
  const path = checkPath(e['path']);
  switch (e['type']) {
    case 'dir':
      return { path, type: 'dir', mode: checkMode(e['mode'], bad) };
    case 'file': {
      const size = e['size'];
      if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) return bad('size');
      return {
        path,
        type: 'file',
        mode: checkMode(e['mode'], bad),
        size,
        digest: parseDigest(e['digest'], `manifest entry ${index} digest`),
      };
    }
    case 'symlink': {
      const target = e['target'];
      if (
        typeof target !== 'string' ||
        target.length === 0 ||
        target.length > MAX_PATH_BYTES ||
        target.includes('\0')
      ) {
        return bad('target');
      }
      return { path, type: 'symlink', target };
    }
    default:
      return bad('type: "dir", "file" or "symlink"');
  }
}

function checkMode(mode: unknown, bad: (what: string) => never): number {
  if (typeof mode !== 'number' || !Number.isInteger(mode) || mode < 0 || mode > 0o777) {
    return bad('mode: permission bits 0..0o777');
  }
  return mode;
}

/** A relative path of plain names: not absolute, no `.`, `..` or empty names, no NUL, bounded. */
export function checkPath(path: unknown): string {
  const unsafe = (why: string): never => {
    throw blobError('unsafe-path', `manifest path ${JSON.stringify(path)}: ${why}`, {
      path: typeof path === 'string' ? path : null,
    });
  };
  if (typeof path !== 'string' || path.length === 0) return unsafe('a non-empty string');
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) return unsafe(`longer than ${MAX_PATH_BYTES} bytes`);
  if (path.includes('\0')) return unsafe('contains NUL');
  if (path.startsWith('/')) return unsafe('absolute');
  for (const name of path.split('/')) {
    if (name === '' || name === '.' || name === '..') return unsafe('has an empty, "." or ".." name');
    if (Buffer.byteLength(name) > MAX_NAME_BYTES) return unsafe(`a name longer than ${MAX_NAME_BYTES} bytes`);
  }
  return path;
}
