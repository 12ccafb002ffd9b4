// The workloads bench's table: per workload the median time natively, through fuse-overlayfs and through
// an AgentFense sandbox with both ratios to native, the agentfense ratio over fuse-overlayfs's, and the
// FUSE requests the sandbox's worker answered; then the acceptance line.
import console from 'node:console';

export const TARGETS = ['native', 'overlay', 'agentfense'];
/** FUSE request kinds shown per workload (the most frequent first). */
const TOP_OPS = Number(process.env.BENCH_TOP_OPS ?? 7);
/** A gated workload's target: at most this many times native. */
const GATE = 2;

/** Per workload and target: the times (ms), the agentfense op counts per round, the failures. */
export function emptyResults(workloads) {
  const results = new Map();
  for (const w of workloads) {
    results.set(
      w.name,
      Object.fromEntries(TARGETS.map((t) => [t, { ms: [], ops: [], cpuMs: [], p50Us: [], errors: [] }])),
    );
  }
  return results;
}

export function median(xs) {
  if (xs.length === 0) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

const int = (n) => Math.round(n).toLocaleString('en-US');
const ms = (n) => (n === undefined ? 'failed' : `${int(n)} ms`);
const ratio = (n) => (n === undefined ? '-' : `${n.toFixed(2)}x`);

/** The median count of each op over the rounds, the most frequent first: `lookup 2,803 create 1,400 …`. */
function formatOps(rounds) {
  if (rounds.length === 0) return '-';
  const names = new Set(rounds.flatMap((r) => Object.keys(r)));
  const medians = [...names]
    .map((op) => [op, median(rounds.map((r) => r[op] ?? 0))])
    .filter(([, n]) => n > 0);
  medians.sort((a, b) => b[1] - a[1]);
  const shown = medians.slice(0, TOP_OPS).map(([op, n]) => `${op} ${int(n)}`);
  const rest = medians.slice(TOP_OPS).reduce((sum, [, n]) => sum + n, 0);
  return (shown.join(' ') || '0 requests') + (rest > 0 ? ` +${int(rest)} other` : '');
}

/** Medians and ratios of one workload. */
function summarize(r) {
  const native = median(r.native.ms);
  const overlay = median(r.overlay.ms);
  const agentfense = median(r.agentfense.ms);
  const over = (x) => (x === undefined || native === undefined ? undefined : x / native);
  return { native, overlay, agentfense, overlayRatio: over(overlay), agentfenseRatio: over(agentfense) };
}

/** The FUSE requests of one round's op counts (the worker's own walks and read-ahead are not requests). */
const NOT_REQUESTS = new Set([
  'entry-warmup',
  'readahead',
  'store-ahead',
  'listing-replay',
  'plain-entry',
  'refusal-check',
]);
function requests(ops) {
  return Object.entries(ops).reduce((sum, [op, n]) => sum + (NOT_REQUESTS.has(op) ? 0 : n), 0);
}

/**
 * The filesystem daemons' CPU per workload (all threads, median over the rounds): wall time on this shared
 * machine moves with its load, CPU per request much less, and it is what the load multiplies.
 */
function printCpu(rows, width) {
  const measured = rows.filter(({ r }) => r.agentfense.cpuMs.length > 0 || r.overlay.cpuMs.length > 0);
  if (measured.length === 0) return;
  console.log(`
${'daemon CPU'.padEnd(width)}  ${'fuse-overlayfs'.padStart(14)}  ${'agentfense'.padStart(10)}  af/ovl  agentfense per request, p50 in the worker's handler per op`);
  for (const { w, r } of measured) {
    const ovl = median(r.overlay.cpuMs);
    const af = median(r.agentfense.cpuMs);
    const perRequest = r.agentfense.cpuMs.map(
      (c, i) => (c * 1000) / Math.max(1, requests(r.agentfense.ops[i] ?? {})),
    );
    const per = median(perRequest);
    console.log(
      `${w.name.padEnd(width)}  ${(ovl === undefined ? '-' : `${ovl.toFixed(0)} ms`).padStart(14)}  ` +
        `${(af === undefined ? '-' : `${af.toFixed(0)} ms`).padStart(10)}  ` +
        `${(ovl === undefined || af === undefined || ovl === 0 ? '-' : (af / ovl).toFixed(2)).padStart(6)}  ` +
        `${per === undefined ? '-' : `${per.toFixed(0)} µs`}  ${formatP50(r.agentfense)}`,
    );
  }
}

/** The handler p50 of the workload's four most frequent requests (since the sandbox started), medians. */
function formatP50(r) {
  if (r.p50Us.length === 0 || r.ops.length === 0) return '';
  const counts = r.ops[0];
  const top = Object.keys(counts)
    .filter((op) => !NOT_REQUESTS.has(op))
    .sort((a, b) => counts[b] - counts[a])
    .slice(0, 4);
  return top.map((op) => `${op} ${int(median(r.p50Us.map((p) => p[op] ?? 0)))} µs`).join(' ');
}

/** Prints the table, then the failures (if any) and the acceptance line. */
export function printReport({ workloads, results }) {
  const rows = workloads.map((w) => ({ w, s: summarize(results.get(w.name)), r: results.get(w.name) }));
  const width = Math.max(...workloads.map((w) => w.name.length));
  const head = `${'workload'.padEnd(width)}  ${'native'.padStart(9)}  ${'fuse-overlayfs'.padStart(19)}  ${'agentfense'.padStart(19)}  ${'af/ovl'.padStart(6)}  agentfense FUSE requests (median per run)`;
  console.log(head);
  console.log('-'.repeat(head.length + 20));
  for (const { w, s, r } of rows) {
    const both = s.agentfenseRatio !== undefined && s.overlayRatio !== undefined;
    console.log(
      `${w.name.padEnd(width)}  ${ms(s.native).padStart(9)}  ${ms(s.overlay).padStart(10)} ${ratio(s.overlayRatio).padStart(8)}  ` +
        `${ms(s.agentfense).padStart(10)} ${ratio(s.agentfenseRatio).padStart(8)}  ` +
        `${(both ? ratio(s.agentfenseRatio / s.overlayRatio) : '-').padStart(6)}  ${formatOps(r.agentfense.ops)}`,
    );
  }
  printCpu(rows, width);
  const failures = rows.flatMap(({ w, r }) =>
    TARGETS.flatMap((t) => r[t].errors.map((e) => `  ${w.name} on ${t}: ${e}`)),
  );
  if (failures.length > 0) console.log(`\nfailures:\n${failures.join('\n')}`);
  const vsOverlay = rows
    .filter(({ s }) => s.agentfenseRatio !== undefined && s.overlayRatio !== undefined)
    .map(({ w, s }) => `${w.name} ${ratio(s.agentfenseRatio)} vs ${ratio(s.overlayRatio)}`);
  const gates = rows
    .filter(({ w }) => w.gate)
    .map(({ w, s }) => {
      const met = s.agentfenseRatio !== undefined && s.agentfenseRatio <= GATE;
      return `${w.name} ${ratio(s.agentfenseRatio)} ${met ? 'met' : 'MISSED'}`;
    });
  console.log(`\nacceptance: agentfense vs fuse-overlayfs (ratios to native): ${vsOverlay.join('; ')}`);
  console.log(`acceptance: agentfense at or below ${GATE}x native: ${gates.join('; ') || '-'}`);
  return failures.length;
}
