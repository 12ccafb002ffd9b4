// The shapes PolicyFs answers with and is built from (the binding and the worker server use them).
import type { RuleSet } from '@agentfense/protocol';
import type { AuditLog } from '../audit.js';
import type { Delta } from '../delta/delta.js';
import type { SetattrOptions } from '../delta/types.js';
import type { FuseAttr } from './attrs.js';
import type { OpStats } from './op-stats.js';

/** Who asked (from the FUSE request header). */
export interface Caller {
  readonly pid: number;
  readonly uid: number;
  readonly gid: number;
}

/** A positive lookup answer. */
export interface EntryReply {
  readonly ino: number;
  readonly attr: FuseAttr;
  readonly entryTimeout: number;
  readonly attrTimeout: number;
}

/** A CREATE answer: the entry, and whether the new file's writes bypass the mount's page cache. */
export interface CreateReply extends EntryReply {
  readonly directIo: boolean;
}

/** A negative lookup answer the kernel may cache (the name does not exist at all). */
export interface NegativeEntry {
  readonly ino: 0;
  readonly entryTimeout: number;
}

/** One packed directory entry. */
export interface DirEntryOut {
  readonly name: string;
  readonly ino: number;
  /** File type bits (S_IFDIR, S_IFREG, ...). */
  readonly mode: number;
  /** Offset of the entry after this one. */
  readonly nextOffset: number;
}

/** SETATTR fields (absent = unchanged): the delta's own shape, passed on once decided. */
export type SetattrChanges = SetattrOptions;

/** A file offset exactly as the kernel sent it: a bigint above 2^53 - 1 (see packages/fuse-native/README.md). */
export type Offset = number | bigint;

export interface StatfsReply {
  readonly bsize: number;
  readonly frsize: number;
  readonly blocks: number;
  readonly bfree: number;
  readonly bavail: number;
  readonly files: number;
  readonly ffree: number;
  readonly favail: number;
  readonly namemax: number;
}

/** Kernel cache invalidation (implemented by the binding; must never block the JS thread on the kernel). */
export interface Invalidator {
  /** Drops the kernel's attributes and cached data of a node. */
  inode(ino: number): Promise<void>;
  /** Drops the kernel's dentry `name` in directory `parent` (positive or negative). */
  entry(parent: number, name: string): Promise<void>;
  /**
   * Called before any invalidation that may take a file's cached contents back: store-ahead stores
   * prepared before it are dropped, those in progress reach the kernel first (store-ahead.ts).
   */
  beforeContents?(): void;
}

export interface PolicyFsOptions {
  readonly delta: Delta;
  readonly rules: RuleSet;
  readonly audit: AuditLog;
  /** Seconds the kernel may cache visible entries and attributes. */
  readonly cacheTtlSeconds: number;
  /** Owner reported for every entry (the mounting uid, which is the sandbox user inside bwrap). */
  readonly uid: number;
  readonly gid: number;
  /** A host path on the delta's filesystem, for statfs. */
  readonly statfsPath: string;
  /** Where read-ahead warm-ups are counted (as op `readahead`), next to the requests. */
  readonly stats?: OpStats;
}
