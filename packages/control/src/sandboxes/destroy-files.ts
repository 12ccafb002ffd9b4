// The files of a destroyed sandbox: moved to the data directory's trash and removed in the background
// (trash.ts), or removed here when the trash cannot take them; `keepDelta` keeps the delta only.
import { readdir } from 'node:fs/promises';
import { removeTree } from '@agentfense/fuse-worker';
import type { SandboxTrash } from './trash.js';

export async function removeSandboxFiles(options: {
  readonly dir: string;
  readonly id: string;
  readonly trash: SandboxTrash;
  readonly keepDelta?: boolean | undefined;
}): Promise<void> {
  const { dir } = options;
  if (options.keepDelta === true) {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      if (name !== 'delta') await removeTree(`${dir}/${name}`);
    }
  } else if (!(await options.trash.discard(dir, options.id))) {
    // Directory fds all the way down: a delta 3000 levels deep or with 200-character names is removed
    // too (paths past 4096 bytes cannot be handed to the kernel).
    await removeTree(dir);
  }
}
