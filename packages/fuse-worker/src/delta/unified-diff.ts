// A `diff -u` style unified diff of two texts (Myers' O(ND) algorithm, 3 lines of context).

const CONTEXT = 3;
/** Beyond this many edits the middle of a file is shown as replaced wholesale (bounded time and memory). */
const MAX_EDIT_DISTANCE = 1000;

type Op = { readonly kind: ' ' | '-' | '+'; readonly line: string };

export interface UnifiedDiffOptions {
  readonly oldText: string;
  readonly newText: string;
  /** Header names, e.g. 'a/src/x.ts' and 'b/src/x.ts', or '/dev/null'. */
  readonly oldName: string;
  readonly newName: string;
}

/** The unified diff of two texts, '' when they are equal. Lines keep their '\n' so a missing final newline shows. */
export function unifiedDiff(options: UnifiedDiffOptions): string {
  const a = splitLines(options.oldText);
  const b = splitLines(options.newText);
  const ops = diffLines(a, b);
  if (!ops.some((op) => op.kind !== ' ')) return '';
  let out = `--- ${options.oldName}\n+++ ${options.newName}\n`;
  for (const hunk of hunks(ops)) out += hunk;
  return out;
}

function splitLines(text: string): string[] {
  const lines = text.match(/[^\n]*\n|[^\n]+$/g);
  return lines === null ? [] : lines;
}

/** Edit script from a to b: common prefix/suffix trimmed, Myers on the middle. */
function diffLines(a: readonly string[], b: readonly string[]): Op[] {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const ops: Op[] = a.slice(0, start).map((line) => ({ kind: ' ', line }));
  ops.push(...myers(a.slice(start, endA), b.slice(start, endB)));
  for (const line of a.slice(endA)) ops.push({ kind: ' ', line });
  return ops;
}

function myers(a: readonly string[], b: readonly string[]): Op[] {
  const n = a.length;
  const m = b.length;
  const max = Math.min(n + m, MAX_EDIT_DISTANCE);
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= max; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      const down = k === -d || (k !== d && (v[offset + k - 1] ?? 0) < (v[offset + k + 1] ?? 0));
      let x = down ? (v[offset + k + 1] ?? 0) : (v[offset + k - 1] ?? 0) + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) return backtrack(a, b, trace, d, k, offset);
    }
  }
  // Too different: everything removed, then everything added.
  return [...a.map((line): Op => ({ kind: '-', line })), ...b.map((line): Op => ({ kind: '+', line }))];
}

function backtrack(
  a: readonly string[],
  b: readonly string[],
  trace: readonly Int32Array[],
  dEnd: number,
  kEnd: number,
  offset: number,
): Op[] {
  const ops: Op[] = [];
  let x = a.length;
  let y = b.length;
  let k = kEnd;
  for (let d = dEnd; d > 0; d--) {
    const v = trace[d] as Int32Array;
    const down = k === -d || (k !== d && (v[offset + k - 1] ?? 0) < (v[offset + k + 1] ?? 0));
    const prevK = down ? k + 1 : k - 1;
    const prevX = v[offset + prevK] ?? 0;
    const prevY = prevX - prevK;
    while (x > prevX + (down ? 0 : 1) && y > prevY + (down ? 1 : 0)) {
      ops.push({ kind: ' ', line: a[--x] as string });
      y--;
    }
    if (down) ops.push({ kind: '+', line: b[--y] as string });
    else ops.push({ kind: '-', line: a[--x] as string });
    k = prevK;
  }
  while (x > 0 && y > 0) {
    ops.push({ kind: ' ', line: a[--x] as string });
    y--;
  }
  return ops.reverse();
}

/** Groups an edit script into hunks with CONTEXT lines around changes. */
function hunks(ops: readonly Op[]): string[] {
  const out: string[] = [];
  const changed = ops.map((op, i) => (op.kind === ' ' ? -1 : i)).filter((i) => i >= 0);
  let i = 0;
  while (i < changed.length) {
    const first = changed[i] as number;
    let last = first;
    while (i + 1 < changed.length && (changed[i + 1] as number) - last <= 2 * CONTEXT + 1)
      last = changed[++i] as number;
    i++;
    const from = Math.max(0, first - CONTEXT);
    const to = Math.min(ops.length, last + CONTEXT + 1);
    let oldStart = 1;
    let newStart = 1;
    for (const op of ops.slice(0, from)) {
      if (op.kind !== '+') oldStart++;
      if (op.kind !== '-') newStart++;
    }
    let oldLen = 0;
    let newLen = 0;
    let body = '';
    for (const op of ops.slice(from, to)) {
      if (op.kind !== '+') oldLen++;
      if (op.kind !== '-') newLen++;
      body += op.kind + op.line;
      if (!op.line.endsWith('\n')) body += '\n\\ No newline at end of file\n';
    }
    out.push(`@@ -${range(oldStart, oldLen)} +${range(newStart, newLen)} @@\n${body}`);
  }
  return out;
}

function range(start: number, length: number): string {
  if (length === 1) return String(start);
  return `${length === 0 ? start - 1 : start},${length}`;
}
