// What a frozen layer holds on the host, in the disk quota's own measure (quota.ts): each upper inode, the
// upper root included, by the blocks it holds (hard links once, at least MIN_CHARGE, a directory at least
// its size) plus the bytes of its metadata files (snapshot and journal). A checkpoint charges this to the
// sandbox that made it: the quota's live count of the layer, equal to this walk of it.
import { lstatSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';

import type { DiskQuota } from './quota.js';
import { upperCharges } from './quota.js';

/** The bytes the layer at `layerDir` (upper/ and meta/) costs. A walk: O(entries). */
export async function layerBytes(layerDir: string): Promise<number> {
  let bytes = 0;
  for (const charge of (await upperCharges(join(layerDir, 'upper'))).values()) bytes += charge;
  const metaDir = join(layerDir, 'meta');
  for (const name of await readdir(metaDir)) {
    if (name === 'snapshot.json' || /^journal-\d+\.jsonl$/.test(name)) {
      bytes += Number(lstatSync(join(metaDir, name)).size);
    }
  }
  return bytes;
}

/**
 * What the writable layer costs now, read before a checkpoint freezes it: the quota's own count (exact,
 * O(1) once its opening recount is done), or null without a quota (the checkpoint stays O(1): the
 * control plane measures the layer with layerBytes in the background).
 */
export async function writableBytes(quota: DiskQuota | null): Promise<number | null> {
  if (quota === null) return null;
  await quota.whenReady();
  quota.settle();
  return quota.used;
}
