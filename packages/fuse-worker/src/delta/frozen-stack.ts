// Opening a stack of frozen layers over the codebase, oldest first, each one the lower layer of the next.
import { resolve as absolute } from 'node:path';

import type { HostDir } from '../host/host-dir.js';
import type { LowerLayer } from './context.js';
import { FrozenView } from './frozen-view.js';
import { StackView } from './stack-view.js';

/**
 * The frozen layers' views, oldest first, and what the writable layer sees below it: the codebase when
 * there is none, else a StackView of them (its location cache new with every stack).
 */
export interface FrozenStack {
  readonly views: readonly FrozenView[];
  readonly top: LowerLayer;
}

/** The stack of `views` (oldest first, each opened over the one before it, the oldest over `codebase`). */
export function stackOf(codebase: HostDir, views: readonly FrozenView[]): FrozenStack {
  return { views, top: views.length === 0 ? codebase : new StackView({ views, codebase }) };
}

/** Absolute, normalized layer directories (how stacks are recorded and compared). */
export function normalizeStack(dirs: readonly string[]): string[] {
  return dirs.map((dir) => absolute(dir));
}

/**
 * Opens the frozen layers `dirs` (oldest first) over `codebase`; none is left open on a failure. The
 * views of `reuse` (a stack already open over the same codebase) that are a prefix of `dirs` are taken as
 * they are, not opened again: a view is its layer over the same layers below, and a layer never changes.
 */
export async function openFrozenStack(
  codebase: HostDir,
  dirs: readonly string[],
  reuse: readonly FrozenView[] = [],
): Promise<FrozenStack> {
  const views: FrozenView[] = [];
  let i = 0;
  while (i < dirs.length && i < reuse.length && (reuse[i] as FrozenView).dir === dirs[i]) {
    views.push(reuse[i] as FrozenView);
    i++;
  }
  const opened: FrozenView[] = [];
  try {
    for (const dir of dirs.slice(i)) {
      const view = await FrozenView.open({ dir, below: views.at(-1) ?? codebase });
      opened.push(view);
      views.push(view);
    }
  } catch (err) {
    await closeViews(opened);
    throw err;
  }
  return stackOf(codebase, views);
}

/** Closes frozen layers' own fds, newest first. */
export async function closeViews(views: readonly FrozenView[]): Promise<void> {
  for (const view of [...views].reverse()) await view.close();
}
