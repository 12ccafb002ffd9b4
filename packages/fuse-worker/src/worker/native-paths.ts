// Which requests the binding answers in C for this mount, from the switches left on. Order matters: the
// read, lookup and create paths use the write path's table of decided nodes, and creates use the lookup
// path's marks, so each is turned on after what it builds on.
import type { LowLevelFuse } from '@agentfense/fuse-native';
import type { PolicyFs } from '../fs/policy-fs.js';
import {
  nativeCreates,
  nativeDirAttrs,
  nativeListings,
  nativeLookups,
  nativeReads,
  nativeRmdirs,
  nativeUnlinks,
  nativeWrites,
  narrowRenames,
  type SwitchableFeature,
} from '../mount-options.js';

export function enableNativePaths(options: {
  readonly fs: PolicyFs;
  readonly fuse: LowLevelFuse;
  readonly callerUid: number | undefined;
  readonly disabled: readonly SwitchableFeature[];
}): void {
  const { fs, fuse, callerUid, disabled } = options;
  if (nativeWrites(disabled)) fs.useNativeWrites(fuse, callerUid);
  // wideHandles off keeps the worker's host fds at 512, so READs of evicted files come back to JS.
  if (disabled.includes('wideHandles')) fs.handles.narrow();
  if (nativeReads(disabled)) fs.useNativeReads(fuse, callerUid);
  if (nativeLookups(disabled)) fs.useNativeLookups(fuse, callerUid);
  if (nativeCreates(disabled)) fs.useNativeCreates(fuse, callerUid);
  if (nativeDirAttrs(disabled)) fs.useNativeDirAttrs();
  if (nativeUnlinks(disabled)) fs.useNativeUnlinks();
  if (nativeRmdirs(disabled)) fs.useNativeRmdirs();
  if (nativeListings(disabled)) fs.useNativeListings();
  if (narrowRenames(disabled)) fuse.narrowRenames();
}
