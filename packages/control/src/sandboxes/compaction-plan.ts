// Which two adjacent frozen layers of a stack may be folded into one without changing what anyone sees:
// no checkpoint's view is "the stack up to the lower one", every stack and checkpoint that holds the lower
// one has the upper one directly above it (forks share layers), and one sandbox made both (the merged
// layer is charged to it).

export interface FoldInput {
  /** The stack to make shallower, oldest first. */
  readonly stack: readonly string[];
  /** Every layer list that holds layers: each checkpoint's and each sandbox's stack (this one too). */
  readonly holders: readonly (readonly string[])[];
  /** The sandbox that made a layer (undefined: not recorded). */
  readonly makerOf: (layer: string) => string | undefined;
  /** Layers a compaction under way already folds. */
  readonly busy?: ReadonlySet<string>;
}

/** The lowest foldable pair [lower, upper] of `stack`, or null when every boundary is needed. */
export function foldablePair(o: FoldInput): [string, string] | null {
  for (let i = 0; i + 1 < o.stack.length; i++) {
    const lower = o.stack[i] as string;
    const upper = o.stack[i + 1] as string;
    if (o.busy?.has(lower) === true || o.busy?.has(upper) === true) continue;
    const maker = o.makerOf(lower);
    if (maker === undefined || o.makerOf(upper) !== maker) continue;
    if (o.holders.every((list) => holdsTogether(list, lower, upper))) return [lower, upper];
  }
  return null;
}

/** Whether `list` holds neither layer, or both with `upper` directly above `lower`. */
function holdsTogether(list: readonly string[], lower: string, upper: string): boolean {
  const at = list.indexOf(lower);
  if (at < 0) return !list.includes(upper);
  return list[at + 1] === upper;
}
