// Parsing of repeated CLI values (K=V pairs, durations) with errors that name the flag and the fix.
import { InvalidArgumentError } from '@agentfense/protocol/core';

function pairs(values: readonly string[], flag: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const value of values) {
    const eq = value.indexOf('=');
    if (eq <= 0) throw new InvalidArgumentError(`${flag} ${JSON.stringify(value)}: expected KEY=VALUE`);
    out[value.slice(0, eq)] = value.slice(eq + 1);
  }
  return out;
}

/** `--env K=V` values (names are validated again by the runtime). */
export function parseEnvPairs(values: readonly string[]): Record<string, string> {
  return pairs(values, '--env');
}

/** `--label k=v` values. */
export function parseLabels(values: readonly string[]): Record<string, string> {
  return pairs(values, '--label');
}

/** A positive number of seconds (fractions allowed). */
export function parseSeconds(value: string, flag: string): number {
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw new InvalidArgumentError(`${flag} ${JSON.stringify(value)}: expected a positive number of seconds`);
  }
  return seconds;
}

const SIZE_UNITS: Readonly<Record<string, number>> = {
  '': 1,
  k: 2 ** 10,
  m: 2 ** 20,
  g: 2 ** 30,
  t: 2 ** 40,
};

/** A size in bytes: `1048576`, `512K`, `100M`, `10G`, `1T` (binary units; an optional trailing B/iB). */
export function parseByteSize(value: string, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?$/i.exec(value.trim());
  const bytes = match === null ? NaN : Number(match[1]) * (SIZE_UNITS[(match[2] ?? '').toLowerCase()] ?? NaN);
  if (!Number.isFinite(bytes) || bytes < 1 || !Number.isSafeInteger(Math.floor(bytes))) {
    throw new InvalidArgumentError(
      `${flag} ${JSON.stringify(value)}: expected a size such as 512M, 10G or a number of bytes`,
    );
  }
  return Math.floor(bytes);
}
