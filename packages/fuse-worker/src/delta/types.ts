// Public types of the delta layer (what the FUSE handlers receive and pass).
import type { BigIntStats } from 'node:fs';

import type { CommitMode, CommitNote, CommitResult, DirIdentity } from '@agentfense/protocol';

import type { HostEntryType } from '../host/host-dir.js';

/** Type of an entry in the merged view. */
export type DeltaEntryType = HostEntryType;

/** A host inode identity. */
export interface HostId {
  readonly dev: bigint;
  readonly ino: bigint;
}

/** What `Delta.lookup` finds at a path. */
export interface DeltaLookup {
  /**
   * Which layer serves the entry: the writable one, or one below it (a frozen layer or the codebase).
   * Invariant: an upper entry wins over the lower one.
   */
  readonly layer: 'upper' | 'lower';
  /** lstat of the serving entry (bigint: ns times, sizes above 2^53 exact). */
  readonly stat: BigIntStats;
  readonly type: DeltaEntryType;
  /** The entry's identity in the upper layer, when it is there. */
  readonly upper: HostId | null;
  /**
   * The codebase identity behind the entry: the lower entry itself, or the one this sandbox copied up from
   * (so the FUSE layer can keep inode numbers stable across copy-up). Null for entries the sandbox added.
   * Below frozen layers, the host identity of the layer that serves (or served) it: a frozen layer's
   * inode for entries it holds.
   */
  readonly lower: HostId | null;
}

/** One entry of a merged directory listing. */
export interface DeltaDirEntry {
  readonly name: string;
  readonly type: DeltaEntryType;
}

/** Options of `Delta.rename` (renameat2 flags). */
export interface RenameOptions {
  /** RENAME_NOREPLACE: fail with EEXIST when the destination exists. */
  readonly noReplace?: boolean;
  /** RENAME_EXCHANGE: swap two existing non-directories atomically from the sandbox's point of view. */
  readonly exchange?: boolean;
  /**
   * A directory is not moved (EACCES) when this holds for any entry below it (codebase path, type): the
   * caller passes "hidden from the sandbox", so a rename never carries content the sandbox cannot see.
   */
  readonly refuse?: (path: string, type: DeltaEntryType) => boolean;
}

/** Attributes `Delta.setattr` may change (the caller decided who may change what). */
export interface SetattrOptions {
  /** All 12 permission bits; set-id bits are kept in the delta (commit strips them). */
  readonly mode?: number;
  /** New owner / group (absent = unchanged); applied before `mode`, as a chown clears set-id bits. */
  readonly uid?: number;
  readonly gid?: number;
  /** Exact: a bigint above 2^53 - 1. */
  readonly size?: number | bigint;
  /** Nanoseconds since the epoch, or 'now' (set exactly, utimensat). */
  readonly atime?: bigint | 'now';
  readonly mtime?: bigint | 'now';
}

/** The subset of a pino logger the delta layer uses. */
export interface DeltaLogger {
  warn(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

export interface DeltaOpenOptions {
  /** The codebase: read-only except through commit; opened without following any symlink. */
  readonly lowerDir: string;
  /** The codebase directory's identity when it was linked: another directory there is refused. */
  readonly lowerIdentity?: DirIdentity | undefined;
  /** This sandbox's delta directory (created if missing; its parent must exist). */
  readonly deltaDir: string;
  readonly logger?: DeltaLogger;
  /** Owner of upper copies of codebase entries (see DeltaContext.owner); default: left as made. */
  readonly owner?: { readonly uid: number; readonly gid: number };
  /**
   * Cached lower directory fds older than this are re-opened, bounding how long a directory replaced by
   * another sandbox's commit stays stale in this one (default 2000 ms).
   */
  readonly lowerCacheMaxAgeMs?: number;
  /** Bytes the upper layer may hold (see quota.ts); undefined = no limit. */
  readonly diskQuotaBytes?: number;
  /** Bytes of the frozen layers this sandbox made, charged to the same quota (see quota.ts); default 0. */
  readonly frozenBytes?: number;
  /**
   * The frozen layers between the writable layer and the codebase (absolute directories, oldest first).
   * Must equal the stack the delta recorded (meta/stack.json), unless the delta is new (no stack recorded,
   * an empty writable layer): it then takes this stack. Undefined: the recorded stack (none: no layer).
   */
  readonly frozen?: readonly string[];
}

/** Restricts diff/commit/discard to these codebase paths and everything below them. */
export interface PathFilter {
  readonly paths?: readonly string[];
}

export interface CommitOptions extends PathFilter {
  readonly mode: CommitMode;
  /** Aborting stops the commit between two changes; the result then says `interrupted`. */
  readonly signal?: AbortSignal;
}

/**
 * A commit's outcome: `skipped` lists device nodes, FIFOs and sockets, which are never written to the
 * codebase (they stay in the delta); `changed` lists files written without their set-id bits.
 */
export interface DeltaCommitResult extends CommitResult {
  readonly skipped: readonly CommitNote[];
  readonly changed: readonly CommitNote[];
}

/** Unified diff of the text files in the change set, and the paths of changed binary files. */
export interface DeltaDiff {
  readonly diff: string;
  readonly binary: readonly string[];
}
