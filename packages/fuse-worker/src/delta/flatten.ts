// Flattening a stack into its writable layer, so that a commit or a partial discard runs as it does on a
// delta without frozen layers: afterwards the writable layer alone, over the codebase, shows exactly what
// the stack showed, and the delta's stack is []. The frozen layers are only read (other checkpoints and
// forks share them). Two phases, recorded in meta/layers-intent.json:
//  1. Copy (rolled back after a crash): every entry a frozen layer serves is copied into the writable layer
//     as a copy-up would (its base is what it copies), a whole subtree built in work/ and renamed in; then
//     the times of the writable directories that received them are set back. At every moment the view is
//     the stack's (a copy of what the layer below serves, at a path where nothing of the writable layer
//     was), so rolling back is setting those times back, and the copies may stay.
//  2. Switch (rolled forward): the writable layer takes every layer's whiteouts and each path's lowest
//     base (one delta's terms), its metadata is compacted, and meta/stack.json becomes [].
import { relBase, relJoin, relParent } from '../host/rel-path.js';
import { Yielder } from '../host/yielder.js';
import { tempName, type DeltaContext, type LayerView } from './context.js';
import { flattenFs, type CopyTarget } from './flatten-fs.js';
import { baseOf } from './identity.js';
import {
  readIntent,
  readStack,
  removeIntent,
  writeIntent,
  writeStack,
  type FlattenIntent,
} from './layer-stack.js';
import type { MetaRecord } from './meta-state.js';
import { planStack, type LayerEntry, type StackPlan } from './stack-plan.js';

/** What a flatten works on: the delta (its writable layer), its frozen layers and its directory. */
export interface FlattenOptions {
  readonly ctx: DeltaContext;
  /** The frozen layers, oldest first. */
  readonly frozen: readonly LayerView[];
  /** Their directories (the stack the flatten starts from). */
  readonly from: readonly string[];
  readonly deltaDir: string;
}

/** Records journalled at once during the switch (one write each). */
const RECORDS_PER_WRITE = 10_000;

/**
 * Flattens the stack into the writable layer and records the stack as []; the caller then drops its
 * frozen views. Cost: a copy of every entry the frozen layers serve (the bytes of their changed files),
 * one walk of every layer. Finishes a flatten that reached its switch.
 */
export async function flattenStack(o: FlattenOptions): Promise<void> {
  const { ctx } = o;
  let plan = await planStack([...o.frozen, ctx]);
  const pending = await readIntent(o.deltaDir);
  let intent: FlattenIntent;
  if (pending?.op === 'flatten') {
    intent = pending;
  } else {
    intent = {
      version: 1,
      op: 'flatten',
      from: [...o.from],
      frozen: [],
      times: await receiverTimes(ctx, plan),
      switching: false,
    };
    await writeIntent(o.deltaDir, intent);
  }
  if (!intent.switching) {
    await copyFrozenEntries(ctx, plan);
    await restoreTimes(ctx, intent);
    intent = { ...intent, switching: true };
    await writeIntent(o.deltaDir, intent);
    plan = await planStack([...o.frozen, ctx]);
  }
  await switchToCodebase(ctx, plan, o.deltaDir);
}

/**
 * Finishes a flatten that failed or was interrupted: back before its switch (the times set back, the
 * intent removed), forward after it. Returns whether the delta's stack is now [] ('after').
 */
export async function settleFlatten(o: FlattenOptions): Promise<'before' | 'after'> {
  const intent = await readIntent(o.deltaDir);
  if (intent === null) return (await readStack(o.deltaDir)).length === 0 ? 'after' : 'before';
  if (intent.op !== 'flatten') return 'before';
  if (!intent.switching) {
    await restoreTimes(o.ctx, intent);
    await removeIntent(o.deltaDir);
    return 'before';
  }
  await flattenStack(o);
  return 'after';
}

/**
 * The entries frozen layers serve whose parent the writable layer serves (or the root): each one's
 * subtree is copied whole. Below such an entry the writable layer has nothing (it would need the parent).
 */
function copyRoots(plan: StackPlan): { roots: LayerEntry[]; children: Map<string, LayerEntry[]> } {
  const top = plan.layers.length - 1;
  const roots: LayerEntry[] = [];
  const children = new Map<string, LayerEntry[]>();
  for (const e of plan.entries.values()) {
    if (e.layer === top) continue;
    const parentRel = relParent(e.rel);
    const parent = parentRel === '' ? undefined : plan.entries.get(parentRel);
    if (parent === undefined || parent.layer === top) {
      roots.push(e);
    } else {
      let list = children.get(parentRel);
      if (list === undefined) children.set(parentRel, (list = []));
      list.push(e);
    }
  }
  return { roots, children };
}

/** The times of the writable directories that will receive a copy (set back after: renames change them). */
async function receiverTimes(ctx: DeltaContext, plan: StackPlan): Promise<FlattenIntent['times']> {
  const times: [string, string, string][] = [];
  const seen = new Set<string>();
  for (const root of copyRoots(plan).roots) {
    const parent = relParent(root.rel);
    if (parent === '' || seen.has(parent)) continue;
    seen.add(parent);
    const st = await ctx.upper.lstat(parent);
    times.push([parent, st.atimeNs.toString(), st.mtimeNs.toString()]);
  }
  return times;
}

async function restoreTimes(ctx: DeltaContext, intent: FlattenIntent): Promise<void> {
  for (const [rel, atime, mtime] of intent.times) {
    await flattenFs.setTimes(ctx.upper, rel, BigInt(atime), BigInt(mtime));
  }
}

/** Copies each subtree the frozen layers serve into the writable layer: built in work/, renamed in. */
async function copyFrozenEntries(ctx: DeltaContext, plan: StackPlan): Promise<void> {
  const { roots, children } = copyRoots(plan);
  const yielder = new Yielder();
  for (const root of roots) {
    await yielder.maybe();
    // Records first, as copy-up does: an entry with a base below it gets the base of what it copies (the
    // frozen entry), so until the switch the writable layer says what it says after any copy-up.
    const records: MetaRecord[] = [];
    for (const e of subtree(root, children)) {
      if (plan.meta.base(e.rel) !== undefined) records.push({ op: 'base', path: e.rel, base: baseOf(e.st) });
    }
    ctx.journal.record(records);
    const to: CopyTarget = { work: ctx.work, rel: tempName('flatten') };
    try {
      await copyTree(plan, children, root, to);
      await flattenFs.place(to, ctx.upper, root.rel);
    } catch (err) {
      try {
        await flattenFs.discard(to);
      } catch {
        // Left in work/, which the next open empties.
      }
      throw err;
    }
  }
}

function* subtree(root: LayerEntry, children: Map<string, LayerEntry[]>): Generator<LayerEntry> {
  const stack = [root];
  for (let e = stack.pop(); e !== undefined; e = stack.pop()) {
    yield e;
    stack.push(...(children.get(e.rel) ?? []));
  }
}

/** Copies `entry` and what it holds to `to`; a directory's times are set once it is filled. */
async function copyTree(
  plan: StackPlan,
  children: Map<string, LayerEntry[]>,
  entry: LayerEntry,
  to: CopyTarget,
): Promise<void> {
  const from = (plan.layers[entry.layer] as LayerView).upper;
  await flattenFs.copyEntry(from, entry.rel, entry.st, to);
  if (!entry.st.isDirectory()) return;
  for (const child of children.get(entry.rel) ?? []) {
    await copyTree(plan, children, child, { work: to.work, rel: relJoin(to.rel, relBase(child.rel)) });
  }
  await flattenFs.setTimes(to.work, to.rel, entry.st.atimeNs, entry.st.mtimeNs);
}

/**
 * The switch: the writable layer (holding every entry the stack shows) takes every whiteout and the
 * lowest bases, then the stack becomes []. Each step is safe to run again.
 */
async function switchToCodebase(ctx: DeltaContext, plan: StackPlan, deltaDir: string): Promise<void> {
  const top = plan.layers.length - 1;
  for (const e of plan.entries.values()) {
    // Never switch to a view without something the stack shows.
    if (e.layer !== top) throw new Error(`flatten: /${e.rel} of a frozen layer was not copied`);
  }
  const records: MetaRecord[] = [];
  const yielder = new Yielder();
  const flush = (): void => {
    ctx.journal.record(records);
    records.length = 0;
  };
  for (const rel of plan.meta.whiteoutPaths()) {
    await yielder.maybe();
    if (!ctx.meta.isWhiteout(rel)) records.push({ op: 'whiteout', path: rel });
    if (records.length >= RECORDS_PER_WRITE) flush();
  }
  flush();
  const rebase = (rel: string): void => {
    const base = plan.meta.base(rel);
    if (base !== undefined && JSON.stringify(base) !== JSON.stringify(ctx.meta.base(rel)))
      records.push({ op: 'rebase', path: rel, base });
  };
  for (const rel of plan.entries.keys()) {
    await yielder.maybe();
    rebase(rel);
    if (records.length >= RECORDS_PER_WRITE) flush();
  }
  for (const rel of plan.meta.whiteoutPaths()) {
    await yielder.maybe();
    rebase(rel);
    if (records.length >= RECORDS_PER_WRITE) flush();
  }
  flush();
  await ctx.journal.compact(ctx.meta);
  await writeStack(deltaDir, []);
  await removeIntent(deltaDir);
}
