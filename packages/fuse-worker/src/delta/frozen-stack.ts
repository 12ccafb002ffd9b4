// Opening a stack of frozen layers over the codebase, oldest first, each one the lower layer of the next.
import { resolve as absolute } from 'node:path';

import type { HostDir } from '../host/host-dir.js';
import type { LowerLayer } from './context.js';
import { FrozenView } from './frozen-view.js';

/** The frozen layers' views, oldest first, and the one the writable layer sees (the codebase when none). */
export interface FrozenStack {
  readonly views: readonly FrozenView[];
  readonly top: LowerLayer;
}

/** Absolute, normalized layer directories (how stacks are recorded and compared). */
export function normalizeStack(dirs: readonly string[]): string[] {
  return dirs.map((dir) => absolute(dir));
}

/** Opens the frozen layers `dirs` (oldest first) over `codebase`; none is left open on a failure. */
export async function openFrozenStack(codebase: HostDir, dirs: readonly string[]): Promise<FrozenStack> {
  const views: FrozenView[] = [];
  let top: LowerLayer = codebase;
  try {
    for (const dir of dirs) {
      const view = await FrozenView.open({ dir, below: top });
      views.push(view);
      top = view;
    }
  } catch (err) {
    await closeViews(views);
    throw err;
  }
  return { views, top };
}

/** Closes frozen layers' own fds, newest first. */
export async function closeViews(views: readonly FrozenView[]): Promise<void> {
  for (const view of [...views].reverse()) await view.close();
}
