// Test fixture: a codebase (lower) dir with some files and a delta over it, removed after the test.
import { constants } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { onTestFinished } from 'vitest';

import { Delta } from '../../src/delta/delta.js';

export interface Fixture {
  readonly root: string;
  readonly lower: string;
  readonly deltaDir: string;
  readonly delta: Delta;
  /** Opens another delta over the same lower dir (closed after the test). */
  open(deltaDir?: string): Promise<Delta>;
}

/** Creates lower files from `files` (path -> content; a trailing '/' makes a directory). */
export async function fixture(files: Record<string, string> = {}): Promise<Fixture> {
  const root = await mkdtemp(join(tmpdir(), 'af-delta-'));
  onTestFinished(() => rm(root, { recursive: true, force: true }));
  const lower = join(root, 'lower');
  await mkdir(lower);
  for (const [path, content] of Object.entries(files)) {
    if (path.endsWith('/')) {
      await mkdir(join(lower, path), { recursive: true });
    } else {
      await mkdir(dirname(join(lower, path)), { recursive: true });
      await writeFile(join(lower, path), content);
    }
  }
  const open = async (deltaDir = join(root, 'delta')): Promise<Delta> => {
    await mkdir(deltaDir, { recursive: true });
    const delta = await Delta.open({ lowerDir: lower, deltaDir });
    onTestFinished(() => delta.close());
    return delta;
  };
  const delta = await open();
  return { root, lower, deltaDir: join(root, 'delta'), delta, open };
}

/** Reads a merged file through the delta. */
export async function read(delta: Delta, path: string): Promise<string> {
  const fh = await delta.openForRead(path);
  try {
    return await fh.readFile('utf8');
  } finally {
    await fh.close();
  }
}

/** Writes (replacing) a merged file through the delta, creating it when missing. */
export async function write(delta: Delta, path: string, content: string, mode = 0o644): Promise<void> {
  const exists = (await delta.lookup(path)) !== null;
  const fh = exists
    ? await delta.openForWrite(path, constants.O_WRONLY | constants.O_TRUNC)
    : await delta.create(path, mode, constants.O_WRONLY);
  try {
    await fh.writeFile(content);
  } finally {
    await fh.close();
  }
}

/** Sorted names of a merged directory. */
export async function names(delta: Delta, path: string): Promise<string[]> {
  return (await delta.readdir(path)).map((e) => e.name).sort();
}
