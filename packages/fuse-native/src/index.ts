// @agentfense/fuse-native: a low-level (inode based) libfuse 3 binding for Node, and the host syscalls
// Node lacks or rounds. README.md describes the design.
export { LowLevelFuse } from './fuse.js';
export { Req } from './req.js';
export { FastReads, type FastReadReport } from './fast-reads.js';
export { FastEntries } from './fast-entries.js';
export { FastCreates, type FastCreated } from './fast-creates.js';
export { FastWrites } from './fast-writes.js';
export { hostIo, type HostIo } from './host-io.js';
export type {
  Attr,
  ConnFeatures,
  ConnInfo,
  Dirent,
  DirentPlus,
  EntryParam,
  FeatureRequest,
  HandlerResult,
  LowLevelHandlers,
  LowLevelOptions,
  Offset,
  OpenParam,
  SetattrChanges,
  Statfs,
} from './types.js';
