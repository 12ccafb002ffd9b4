// What both bwrap runtime test files (a bwrap per command, and the per-sandbox launcher) set up: a
// workspace the sandbox user owns, and the list of a sandbox's cgroup directories still present.
import { access, chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBwrapRuntime } from '@agentfense/runtime-bwrap';
import type { WorkspaceFixture } from '../runtime/contract.js';

const CGROUP_ROOT = '/sys/fs/cgroup';
export const quiet = {
  debug: () => undefined,
  warn: (obj: object, msg: string) => console.warn(msg, obj),
};

/** A workspace and state directory; bwrap runs as the sandbox user, who owns the workspace (as the worker reports it). */
export async function makeFixture(): Promise<WorkspaceFixture> {
  const root = await mkdtemp(join(tmpdir(), 'af-bwrap-'));
  const workspaceHostPath = join(root, 'ws');
  const stateDir = join(root, 'state');
  await mkdir(workspaceHostPath);
  await mkdir(stateDir);
  const owner = createBwrapRuntime({ logger: quiet }).traits.hostOwner;
  if (owner !== null) await chown(workspaceHostPath, owner.uid, owner.gid);
  return { workspaceHostPath, stateDir, cleanup: () => rm(root, { recursive: true, force: true }) };
}

/** Cgroup directories of a sandbox that still exist (v1 hierarchies and the unified one). */
export async function cgroupLeftovers(sandboxId: string): Promise<string[]> {
  const left: string[] = [];
  for (const hierarchy of ['memory', 'pids', 'cpu', 'freezer', 'unified']) {
    const dir = join(CGROUP_ROOT, hierarchy, 'agentfense', sandboxId);
    const exists = await access(dir).then(
      () => true,
      () => false,
    );
    if (exists) left.push(dir);
  }
  return left;
}
