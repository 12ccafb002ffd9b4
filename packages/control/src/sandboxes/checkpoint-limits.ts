// How many checkpoints a sandbox may keep and how deep its stack of frozen layers may grow: from the
// control plane's options (`checkpoints.maxCheckpoints`, `checkpoints.maxStackDepth`), else the
// environment (AGENTFENSE_MAX_CHECKPOINTS, AGENTFENSE_MAX_STACK_DEPTH), else the defaults. What the
// layers hold is charged to the sandbox's disk quota (layer-charges.ts); these bound what is not: rows,
// directories, and the O(depth) walk a lookup makes through the stack.
import { InvalidArgumentError } from '@agentfense/protocol';

export interface CheckpointLimits {
  /** Checkpoints one sandbox may keep (default 256). */
  readonly maxCheckpoints: number;
  /** Frozen layers one sandbox's stack may have (default 32); a deeper one is compacted in the background. */
  readonly maxStackDepth: number;
}

export type CheckpointLimitOptions = Partial<CheckpointLimits>;

export const DEFAULT_CHECKPOINT_LIMITS: CheckpointLimits = { maxCheckpoints: 256, maxStackDepth: 32 };

/** Each limit is an integer in this range. */
export const LIMIT_RANGE = { min: 1, max: 4096 } as const;

const SETTINGS = {
  maxCheckpoints: 'AGENTFENSE_MAX_CHECKPOINTS',
  maxStackDepth: 'AGENTFENSE_MAX_STACK_DEPTH',
} as const satisfies Record<keyof CheckpointLimits, string>;

/** The limits in force: each option if given, else its environment variable, else the default. */
export function checkpointLimits(
  options: CheckpointLimitOptions = {},
  env: NodeJS.ProcessEnv = process.env,
): CheckpointLimits {
  const pick = (key: keyof CheckpointLimits): number => {
    const given = options[key];
    if (given !== undefined) return checked(`checkpoints.${key}`, given, String(given));
    const raw = env[SETTINGS[key]];
    if (raw === undefined || raw === '') return DEFAULT_CHECKPOINT_LIMITS[key];
    return checked(SETTINGS[key], /^\d+$/.test(raw) ? Number(raw) : Number.NaN, JSON.stringify(raw));
  };
  return { maxCheckpoints: pick('maxCheckpoints'), maxStackDepth: pick('maxStackDepth') };
}

function checked(setting: string, value: unknown, shown: string): number {
  if (
    typeof value !== 'number' ||
    !Number.isInteger(value) ||
    value < LIMIT_RANGE.min ||
    value > LIMIT_RANGE.max
  ) {
    throw new InvalidArgumentError(
      `${setting} must be an integer from ${LIMIT_RANGE.min} to ${LIMIT_RANGE.max} (got ${shown})`,
    );
  }
  return value;
}

/** The setting that names a limit, as an error shows it. */
export function limitSetting(key: keyof CheckpointLimits): string {
  return `checkpoints.${key} / ${SETTINGS[key]}`;
}
