// A PolicyFs in process over a codebase the test made, for tests of one fs module without a mount.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

import { compileRules, type PermissionRule } from '@agentfense/protocol';

import { AuditLog } from '../../src/audit.js';
import { Delta } from '../../src/delta/delta.js';
import { PolicyFs } from '../../src/fs/policy-fs.js';

export interface PolicyFsOptions {
  /** The owner shown for codebase entries. */
  readonly uid: number;
  readonly gid: number;
  /** Default: everything readable. */
  readonly rules?: readonly PermissionRule[];
}

/**
 * A PolicyFs over `root/lower` (the codebase, made by the caller) with its delta in `root/delta`, its
 * cache TTL 60 s and no audit output; closed when the test finishes.
 */
export async function policyFsOver(root: string, options: PolicyFsOptions): Promise<PolicyFs> {
  return (await policyFsWithDelta(root, options)).fs;
}

/** policyFsOver, with the Delta under it (for tests that watch what reaches the layers). */
export async function policyFsWithDelta(
  root: string,
  options: PolicyFsOptions,
): Promise<{ fs: PolicyFs; delta: Delta }> {
  await mkdir(join(root, 'delta'));
  const delta = await Delta.open({ lowerDir: join(root, 'lower'), deltaDir: join(root, 'delta') });
  const fs = new PolicyFs({
    delta,
    rules: compileRules([...(options.rules ?? [{ pattern: '**', permission: 'read' }])]),
    audit: new AuditLog({ emit: () => undefined }),
    cacheTtlSeconds: 60,
    uid: options.uid,
    gid: options.gid,
    statfsPath: join(root, 'delta'),
  });
  onTestFinished(async () => {
    await fs.close();
    await delta.close();
  });
  return { fs, delta };
}
