// LOOKUP and FORGET: how names come to be known by the kernel, and go.
import { atLeast } from '@agentfense/protocol';
import type { FsCore } from './core.js';
import { allow, lookupPermission } from './decisions.js';
import type { Caller, EntryReply, NegativeEntry } from './types.js';

/**
 * LOOKUP: a visible entry, or a negative entry (cacheable) for a name that does not exist and, alike, for a
 * hidden one: an error reply for hidden names made them reach the worker at every stat while absent ones
 * were answered from the kernel's cache, which told them apart by timing.
 */
export async function lookup(
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
): Promise<EntryReply | NegativeEntry> {
  const generation = fs.cache.generation;
  const path = fs.childPath(parent, name);
  // Hidden: answered before any host I/O, whether the name exists or not.
  if (lookupPermission(fs, path, null, caller) === null) {
    return { ino: 0, entryTimeout: fs.cache.negativeTtl(parent, name, fs.ttl) };
  }
  // A codebase entry under a cached directory is answered without a promise (most of a listing's
  // entries): the same answer, minus the awaits and their allocations.
  const cached = background ? undefined : fs.delta.lookupIfCached(path);
  const found = cached === undefined ? await fs.delta.lookup(path) : cached;
  // Decided after the await, with the rules in force now (setRules may have run meanwhile).
  const permission = lookupPermission(fs, path, found, caller);
  // An invalidation that started while we looked (rule change, discard, commit, writeFile) may already
  // have been processed by the kernel: an answer cached now could outlive it, so cache nothing.
  const ttl = generation === fs.cache.generation ? fs.ttl : 0;
  if (found === null || permission === null) {
    return { ino: 0, entryTimeout: fs.cache.negativeTtl(parent, name, ttl) };
  }
  const node = fs.inodes.remember(parent, name, found.type === 'directory');
  allow(fs, 'lookup', path, permission, caller);
  let entry = fs.entry(node, path, found, permission, ttl);
  if (found.type === 'directory') {
    // Its children's lookups come next: with its fd cached they take no thread-pool trip.
    if (!listed && !background && found.layer === 'lower') fs.delta.cacheLowerDir(path);
    const nlink = await fs.links(node.ino, path, found);
    entry = { ...entry, attr: { ...entry.attr, nlink } };
  }
  if (!listed && found.type === 'file' && atLeast(permission, 'read')) {
    fs.predictor.noteLookup(node.ino);
    if (fs.predictor.readsFollowLookups) fs.readAhead.onLookup(parent, name);
  }
  return entry;
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
  }
}
