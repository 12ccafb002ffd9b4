// Which nodes a RENAME moves and replaces, for the binding (Req.settleRename, fuse-native's
// native/fast-rename.c): a RENAME of a non-directory moves no directory, so no mark's path and no other
// path's rule changes, and only those two nodes' fast-path state needs to end. Decided from the inode
// table in the handler's first synchronous step, before anything changes: the kernel looked both names up
// before sending the RENAME and holds both parents locked until the answer, so the table knows them. A
// node it does not know, or a directory, is "in doubt" (0): everything ends, as for every RENAME before.
import type { InodeTable } from './inodes.js';

export interface RenameNodes {
  /** The node that moves; 0: in doubt. */
  readonly moved: number;
  /** The node the new name replaces; 0: none. */
  readonly replaced: number;
}

export function renameNodes(
  inodes: Pick<InodeTable, 'child'>,
  from: { readonly parent: number; readonly name: string },
  to: { readonly parent: number; readonly name: string },
): RenameNodes {
  const moved = inodes.child(from.parent, from.name);
  const replaced = inodes.child(to.parent, to.name);
  if (moved === undefined || moved.isDir || replaced?.isDir === true) return { moved: 0, replaced: 0 };
  return { moved: moved.ino, replaced: replaced === undefined || replaced === moved ? 0 : replaced.ino };
}
