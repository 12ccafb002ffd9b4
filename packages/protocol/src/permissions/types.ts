// Permission rule types (contract §1). The engine that interprets them lives beside this file.

/** Permission levels, weakest first: the index is the order (none < view < read < write). */
export const PERMISSIONS = ['none', 'view', 'read', 'write'] as const;
export type Permission = (typeof PERMISSIONS)[number];

/** How a rule's pattern matches; inferred from the pattern when a rule omits it. */
export const PATTERN_TYPES = ['glob', 'directory', 'file'] as const;
export type PatternType = (typeof PATTERN_TYPES)[number];

/** A rule as users write it (JSON rule files, presets, the HTTP API after enum normalisation). */
export interface PermissionRule {
  readonly pattern: string;
  readonly permission: Permission;
  readonly type?: PatternType;
  readonly priority?: number;
}

/** A validated rule: type inferred, priority defaulted, `index` = its position in the input list. */
export interface NormalizedRule {
  readonly index: number;
  /** The pattern exactly as the user wrote it (explain output must be recognisable). */
  readonly pattern: string;
  readonly type: PatternType;
  readonly permission: Permission;
  readonly priority: number;
}

/** The outcome of resolving one path: the permission and the deciding rule's index (null = default deny). */
export interface Decision {
  readonly permission: Permission;
  readonly ruleIndex: number | null;
}

/** Whether a path shows up at all: `hidden` = permission none and not a traversable directory. */
export type Visibility = 'hidden' | 'visible';

/** Why a path has the permission it has (for users debugging a denial). */
export interface Explanation {
  /** The normalised path that was resolved. */
  readonly path: string;
  readonly permission: Permission;
  /** The deciding rule, or null when no rule matched (default deny). */
  readonly rule: NormalizedRule | null;
  /** Whether the path, taken as a directory, can be entered and listed (contract §1 exceptions). */
  readonly traversable: boolean;
}
