// The files of a destroyed sandbox: moved to the data directory's trash and removed in the background
// (trash.ts), or removed here when the trash cannot take them; `keepDelta` keeps the delta only. Then its
// host uid is released (its processes are gone by now: the sandbox was torn down first).
import { readdir } from 'node:fs/promises';
import { removeTree } from '@agentfense/fuse-worker';
import type { SandboxPaths } from '../paths.js';
import type { SandboxHostUsers } from './host-user.js';
import type { SandboxTrash } from './trash.js';

export async function removeSandboxFiles(options: {
  readonly paths: SandboxPaths;
  readonly id: string;
  readonly trash: SandboxTrash;
  readonly users: SandboxHostUsers;
  readonly keepDelta?: boolean | undefined;
}): Promise<void> {
  const { dir } = options.paths;
  if (options.keepDelta === true) {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      if (name !== 'delta') await removeTree(`${dir}/${name}`);
    }
  } else if (!(await options.trash.discard(dir, options.id))) {
    // Directory fds all the way down: a delta 3000 levels deep or with 200-character names is removed
    // too (paths past 4096 bytes cannot be handed to the kernel).
    await removeTree(dir);
  }
  // A kept delta's files stay owned by the uid; nothing reads them as the sandbox any more.
  options.users.releaseSandbox(options.paths);
}
