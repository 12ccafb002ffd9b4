// LOOKUP and FORGET: how names come to be known by the kernel, and go.
import { atLeast } from '@agentfense/protocol';
import type { DeltaLookup } from '../delta/types.js';
import type { FsCore } from './core.js';
import { allow, lookupPermission } from './decisions.js';
import type { Caller, EntryReply, NegativeEntry } from './types.js';

export type LookupAnswer = EntryReply | NegativeEntry;

/**
 * LOOKUP: a visible entry, or a negative entry (cacheable) for a name that does not exist and, alike, for a
 * hidden one: an error reply for hidden names made them reach the worker at every stat while absent ones
 * were answered from the kernel's cache, which told them apart by timing.
 *
 * The answer itself, not a promise, when nothing it needs leaves the JS thread (a hidden name, an entry
 * under a cached directory fd, a directory whose link count is known): most LOOKUPs, each spared the
 * async frames, promises and microtasks of its caller's await. Otherwise a promise.
 */
export function lookup(
  fs: FsCore,
  parent: number,
  name: string,
  caller: Caller,
  /** Looked up for a READDIRPLUS listing, not by a walker: the read-ahead follows READs then. */
  listed = false,
  /**
   * For the entry warm-up's listings (entry-warmup.ts): the host is asked from the thread pool even when the
   * synchronous path would do, so a cold inode's disk read never holds the JS thread the sandbox needs.
   */
  background = false,
): LookupAnswer | Promise<LookupAnswer> {
  try {
    return lookupNow(fs, parent, name, caller, listed, background);
  } catch (err) {
    // A failure is a rejection, as from the asynchronous path.
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

function lookupNow(
  fs: FsCore,
  parent: number,
  name: string,
  caller: Caller,
  listed: boolean,
  background: boolean,
): LookupAnswer | Promise<LookupAnswer> {
  const generation = fs.cache.generation;
  const path = fs.childPath(parent, name);
  // Hidden: answered before any host I/O, whether the name exists or not.
  if (lookupPermission(fs, path, null, caller) === null) {
    return { ino: 0, entryTimeout: fs.cache.negativeTtl(parent, name, fs.ttl) };
  }
  // A codebase or delta entry under a cached directory fd is found without a promise.
  const query: LookupQuery = { parent, name, path, caller, generation, listed, background };
  const cached = background ? undefined : fs.delta.lookupIfCached(path);
  if (cached !== undefined) return answer(fs, query, cached);
  return fs.delta.lookup(path).then((found) => answer(fs, query, found));
}

interface LookupQuery {
  readonly parent: number;
  readonly name: string;
  readonly path: string;
  readonly caller: Caller;
  /** The cache generation when the LOOKUP started. */
  readonly generation: number;
  readonly listed: boolean;
  readonly background: boolean;
}

/** The answer for what the delta found; a promise only for a directory whose link count needs a listing. */
function answer(fs: FsCore, q: LookupQuery, found: DeltaLookup | null): LookupAnswer | Promise<LookupAnswer> {
  const { parent, name, path, caller } = q;
  // Decided after the delta's answer, with the rules in force now (setRules may have run meanwhile).
  const permission = lookupPermission(fs, path, found, caller);
  // An invalidation that started while we looked (rule change, discard, commit, writeFile) may already
  // have been processed by the kernel: an answer cached now could outlive it, so cache nothing.
  const ttl = q.generation === fs.cache.generation ? fs.ttl : 0;
  if (found === null || permission === null) {
    // A missing name: the binding may answer the next ones in this directory itself (native-lookups.ts).
    if (found === null && permission !== null) {
      fs.nativeLookups?.consider(parent);
      fs.nativeCreates?.refresh();
    }
    return { ino: 0, entryTimeout: fs.cache.negativeTtl(parent, name, ttl) };
  }
  const node = fs.inodes.remember(parent, name, found.type === 'directory');
  allow(fs, 'lookup', path, permission, caller);
  const entry = fs.entry(node, path, found, permission, ttl);
  if (found.type === 'directory') {
    // Its children's lookups come next: with its fd cached they take no thread-pool trip.
    if (!q.listed && !q.background && found.layer === 'lower') fs.delta.cacheLowerDir(path);
    const known = fs.linksIfKnown(node.ino, path, found);
    if (known !== undefined) return withLinks(entry, known);
    return fs.links(node.ino, path, found).then((nlink) => withLinks(entry, nlink));
  }
  if (!q.listed && found.type === 'file' && atLeast(permission, 'read')) {
    fs.predictor.noteLookup(node.ino);
    if (fs.predictor.readsFollowLookups) fs.readAhead.onLookup(parent, name);
  }
  return entry;
}

function withLinks(entry: EntryReply, nlink: number): EntryReply {
  return { ...entry, attr: { ...entry.attr, nlink } };
}

/** FORGET: the kernel dropped references; the node's host handle goes with it. */
export function forget(fs: FsCore, ino: number, count: number): void {
  fs.inodes.forget(ino, count);
  if (fs.inodes.get(ino) === undefined) {
    fs.handles.drop(ino);
    fs.forgetListing(ino);
    fs.cache.forgetNode(ino);
    fs.directWriters.delete(ino);
    fs.subdirCounts.forget(ino);
    fs.nativeLookups?.forget(ino);
  }
}
