// A delta's part of a stack's background compaction: the merged layer built (if no other holder of the
// pair built it first), then the delta put on it in the pair's place.
import { FsError } from '../errors.js';
import type { Delta } from './delta.js';
import { mergeLayers } from './layer-merge.js';

/**
 * Folds the adjacent frozen layers `from` ([lower, upper]) into `to` and (unless `switchStack` is false)
 * puts `delta` on it when its stack holds the pair. The merge runs outside the delta's lock (the two layers never change); the switch
 * under it.
 */
export async function compactStack(
  delta: Delta,
  o: { readonly from: readonly string[]; readonly to: string; readonly switchStack?: boolean | undefined },
): Promise<{ switched: boolean; bytes: number }> {
  const [lower, upper] = o.from;
  if (o.from.length !== 2 || lower === undefined || upper === undefined || lower === upper) {
    throw new FsError('EINVAL', 'a compaction folds two adjacent frozen layers');
  }
  const { bytes } = await mergeLayers({ lower, upper, merged: o.to });
  if (o.switchStack === false) return { switched: false, bytes };
  const switched = await delta.compactLayers({ from: [lower, upper], to: o.to });
  return { switched, bytes };
}
