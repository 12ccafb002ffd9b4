// A new delta directory made to stand on frozen layers (a fork of a checkpoint): its recorded stack is
// written before any worker opens it, so every later open (first mount, restarts, temporary workers)
// finds the stack it was made over and no caller has to repeat it.
import { mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';

import { FsError } from '../errors.js';
import { normalizeStack } from './frozen-stack.js';
import { checkFrozenLayer } from './frozen-view.js';
import { writeStack } from './layer-stack.js';

/**
 * Creates `deltaDir` (which must not exist or be empty) recording `frozen` (frozen layer directories,
 * oldest first) as the stack it stands on. Each must be a frozen layer (its marker is checked).
 */
export async function initDeltaStack(options: {
  readonly deltaDir: string;
  readonly frozen: readonly string[];
}): Promise<void> {
  const frozen = normalizeStack(options.frozen);
  // By marker: reading a layer's metadata replays its journal, which the fork's first open does anyway.
  for (const dir of frozen) checkFrozenLayer(dir);
  await mkdir(options.deltaDir, { recursive: true, mode: 0o700 });
  if ((await readdir(options.deltaDir)).length > 0) {
    throw new FsError('EEXIST', `a delta exists at ${options.deltaDir}: its stack is its own`);
  }
  await mkdir(join(options.deltaDir, 'meta'), { mode: 0o700 });
  await writeStack(options.deltaDir, frozen);
}
