// The change set of a delta, derived from the upper tree plus the whiteouts.
import type { ChangeEntry } from '@agentfense/protocol';

import { relJoin } from '../host/rel-path.js';
import type { DeltaContext } from './context.js';
import type { BaseRecord } from './identity.js';
import { toCodebase } from './paths.js';
import type { DeltaEntryType } from './types.js';

/** One change with what commit and diff need beyond the public entry. */
export interface DeltaChange {
  readonly rel: string;
  readonly entry: ChangeEntry;
  /** Type of the upper entry; null for a deletion. */
  readonly upperType: DeltaEntryType | null;
  /** The codebase entry's identity when the sandbox first touched the path (undefined: never recorded). */
  readonly base: BaseRecord | undefined;
}

/**
 * Lists every change, sorted by path. An upper entry is 'added' when its base says the codebase had
 * nothing there and 'modified' when it had something; upper directories without a base are structure
 * (copies of codebase directories made to hold a child) and are not changes themselves. A whiteout with
 * no upper entry is a deletion. Cost: one readdir per upper directory and one lstat per upper entry.
 */
export async function computeChanges(ctx: DeltaContext): Promise<DeltaChange[]> {
  const changes: DeltaChange[] = [];
  const inUpper = new Set<string>();
  const walk = async (dir: string): Promise<void> => {
    for (const e of await ctx.upper.readdir(dir)) {
      const rel = relJoin(dir, e.name);
      inUpper.add(rel);
      const base = ctx.meta.bases.get(rel);
      if (base !== undefined || e.type !== 'directory') {
        const st = await ctx.upper.lstat(rel);
        let existed = base?.exists;
        // No base for a non-directory only after a crash between a copy and its record: ask the codebase.
        if (existed === undefined)
          existed = !ctx.meta.isHidden(rel) && (await ctx.lower.lstatOrNull(rel)) !== null;
        changes.push({
          rel,
          entry: {
            path: toCodebase(rel),
            kind: existed ? 'modified' : 'added',
            type: publicType(e.type),
            size: e.type === 'directory' ? null : Number(st.size),
          },
          upperType: e.type,
          base,
        });
      }
      if (e.type === 'directory') await walk(rel);
    }
  };
  await walk('');
  for (const rel of ctx.meta.whiteouts) {
    if (inUpper.has(rel)) continue;
    const base = ctx.meta.bases.get(rel);
    const type = base?.exists === true ? publicType(base.type) : 'other';
    changes.push({
      rel,
      entry: { path: toCodebase(rel), kind: 'deleted', type, size: null },
      upperType: null,
      base,
    });
  }
  return changes.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
}

function publicType(type: DeltaEntryType): ChangeEntry['type'] {
  return type === 'fifo' ? 'other' : type;
}
