// The change set of a delta with frozen layers: the net change of the whole stack against the codebase,
// exactly what one delta would report had all the work been done in it without checkpoints. Read-only:
// nothing is copied and no layer changes.
import type { HostDir } from '../host/host-dir.js';
import { collectChanges, type DeltaChange } from './changes.js';
import type { LayerView } from './context.js';
import { planStack } from './stack-plan.js';

/**
 * The change set of `frozen` (oldest first) under the writable layer `top`, sorted by path: each entry the
 * stack shows from a layer is an upper entry (read from the layer holding it), each whiteout of any layer
 * a deletion unless an entry is there again, and added/modified/deleted are decided by the lowest base.
 */
export async function computeStackChanges(o: {
  frozen: readonly LayerView[];
  top: LayerView;
  codebase: HostDir;
}): Promise<DeltaChange[]> {
  const plan = await planStack([...o.frozen, o.top]);
  const writable = plan.layers.length - 1;
  return collectChanges({
    meta: plan.meta,
    codebase: o.codebase,
    upper: o.top.upper,
    entries: (found) => {
      for (const e of plan.entries.values()) {
        found(e.st, e.rel, e.layer === writable ? undefined : (plan.layers[e.layer] as LayerView).upper);
      }
      return Promise.resolve();
    },
    hasUpper: (rel) => Promise.resolve(plan.entries.has(rel)),
  });
}
