// Ordering of permission levels (none < view < read < write).
import { PERMISSIONS } from './types.js';
import type { Permission } from './types.js';

const LEVEL: Readonly<Record<Permission, number>> = { none: 0, view: 1, read: 2, write: 3 };

/** The numeric level of a permission: its index in PERMISSIONS. */
export function permissionLevel(permission: Permission): number {
  return LEVEL[permission];
}

/** True when `permission` grants at least `min` (e.g. atLeast('read', 'view') === true). */
export function atLeast(permission: Permission, min: Permission): boolean {
  return LEVEL[permission] >= LEVEL[min];
}

/** True when `value` is one of the four permission names. */
export function isPermission(value: unknown): value is Permission {
  return typeof value === 'string' && (PERMISSIONS as readonly string[]).includes(value);
}
