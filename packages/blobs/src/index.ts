// @agentfense/blobs: content-addressed blobs for a cluster deployment (docs/scale-out.md). A store every
// node reads (FsBlobStore: a shared directory), codebase snapshots (a manifest blob whose digest is the
// snapshot id), and the per-node cache that materialises a snapshot as a directory for the FUSE worker.
export { BLOB_ERROR_REASONS, blobErrorReason } from './errors.js';
export type { BlobErrorReason } from './errors.js';
export { digestOf, isDigest, parseDigest } from './digest.js';
export type { Digest } from './digest.js';
export type { BlobReader, BlobStore, PutOptions, PutResult } from './store.js';
export { DEFAULT_SWEEP_GRACE_MS, FsBlobStore } from './fs-store.js';
export { copyBlobToFile, readBlob } from './read.js';
export {
  MANIFEST_VERSION,
  MAX_MANIFEST_BYTES,
  encodeManifest,
  parseManifest,
  sortEntries,
} from './manifest.js';
export type { Manifest, ManifestEntry } from './manifest.js';
export { readManifest, snapshotDigests, snapshotDirectory } from './snapshot.js';
export type { SnapshotResult } from './snapshot.js';
export { NodeBlobCache } from './cache.js';
export type { CacheStats, NodeCacheOptions, SnapshotLease } from './cache.js';
export { DEFAULT_HTTP_BLOB_MAX_BYTES, DEFAULT_HTTP_BLOB_TIMEOUT_MS, HttpBlobStore } from './http-store.js';
export type { HttpBlobStoreOptions } from './http-store.js';
