// Human sizes and CPU counts as users type them (`--memory 512M`, `--cpus 1.5`), parsed once for the CLI,
// the HTTP API and embedders. Units are binary like Docker's (`4G` = 4 GiB); errors say what was expected.
import { InvalidArgumentError } from '../errors.js';
import { CPU_PERIOD_US } from '../runtime.js';

const UNITS: Readonly<Record<string, number>> = {
  '': 1,
  b: 1,
  k: 1024,
  m: 1024 ** 2,
  g: 1024 ** 3,
  t: 1024 ** 4,
};

/** Parses `1048576`, `512K`, `512M`, `4G`, `1T` (also `4GiB`, `4GB`, `4g`) into bytes. */
export function parseByteSize(text: string, what = 'size'): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([bkmgt]?)(?:i?b)?\s*$/i.exec(text);
  const unit = UNITS[(match?.[2] ?? '').toLowerCase()];
  if (match === null || unit === undefined) {
    throw new InvalidArgumentError(
      `${what} must be a size like 512M or 4G (units K, M, G, T; binary), got ${JSON.stringify(text)}`,
    );
  }
  const bytes = Math.round(Number(match[1]) * unit);
  if (!Number.isSafeInteger(bytes) || bytes <= 0) {
    throw new InvalidArgumentError(`${what} must be a positive size, got ${JSON.stringify(text)}`);
  }
  return bytes;
}

/** Formats bytes the way parseByteSize reads them back (`4G`, `512M`, or plain bytes). */
export function formatByteSize(bytes: number): string {
  for (const [unit, size] of [
    ['T', 1024 ** 4],
    ['G', 1024 ** 3],
    ['M', 1024 ** 2],
    ['K', 1024],
  ] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return String(bytes);
}

/** Parses a CPU count (`1`, `0.5`, `1.5`) into the contract's cpuQuota (µs per 100 ms period). */
export function parseCpus(text: string): number {
  const cpus = /^\s*\d+(?:\.\d+)?\s*$/.test(text) ? Number(text) : NaN;
  const quota = Math.round(cpus * CPU_PERIOD_US);
  if (!Number.isFinite(cpus) || quota < 1_000) {
    throw new InvalidArgumentError(
      `cpus must be a number of cores of at least 0.01, like 1 or 1.5, got ${JSON.stringify(text)}`,
    );
  }
  return quota;
}
