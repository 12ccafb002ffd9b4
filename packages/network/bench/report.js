// The bench's arithmetic and its lines: medians, MB/s, the verdict against a target.
import console from 'node:console';

export function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

export const median = (values) => quantile(values, 0.5);
export const mbs = (bytesPerSecond) => (bytesPerSecond / 1e6).toFixed(0);
export const verdict = (met) => (met ? 'met' : 'NOT met');

/** One line of a step: a label, the figure, then what it is compared with. */
export function line(label, figure, rest = '') {
  console.log(`   ${label.padEnd(24)} ${figure.padStart(10)}  ${rest}`);
}

/** The first line of an error, for a step that could not run. */
export function firstLine(err) {
  return String(err?.stderr || err?.message || err)
    .trim()
    .split('\n')[0]
    .slice(0, 300);
}
