// Shared by the blob tests: a scratch directory per test and small tree builders.
import { mkdir, mkdtemp, rm, symlink, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterEach } from 'vitest';

const dirs: string[] = [];

afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

export async function scratch(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'af-blobs-'));
  dirs.push(dir);
  return dir;
}

/** Writes a tree: a string is a file's content, `{ link }` a symlink, `{ mode, content }` a file with a mode. */
export async function writeTree(
  root: string,
  tree: Record<string, string | { link: string } | { mode: number; content: string }>,
): Promise<void> {
  for (const [path, value] of Object.entries(tree)) {
    const abs = join(root, path);
    await mkdir(dirname(abs), { recursive: true });
    if (typeof value === 'string') await writeFile(abs, value);
    else if ('link' in value) await symlink(value.link, abs);
    else {
      await writeFile(abs, value.content);
      await chmod(abs, value.mode);
    }
  }
}

/** An async source yielding `chunks`, failing after them when `fail` is set. */
export async function* chunksOf(chunks: readonly string[], fail?: Error): AsyncIterable<Uint8Array> {
  for (const c of chunks) {
    await nextTurn();
    yield Buffer.from(c);
  }
  if (fail !== undefined) throw fail;
}
