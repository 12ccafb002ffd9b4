// Permission rule types (SPEC §1). The engine that interprets them lives beside this file.

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
