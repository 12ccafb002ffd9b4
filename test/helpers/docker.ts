// Shared pieces of the docker tests: what the global setup provides, workspaces on a shared mount (docker's
// rslave bind requires one), and leftover containers.
import { chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { POOL_OWNER_LABEL, SANDBOX_LABEL, SANDBOX_USER } from '@agentfense/runtime-docker';
import type { WorkspaceFixture } from '../runtime/contract.js';

/** Provided by test/helpers/docker-setup.ts. */
export interface DockerTestContext {
  /** The engine to use (DOCKER_HOST form), or null when docker tests cannot run. */
  readonly dockerHost: string | null;
  /** Why docker tests are skipped; null when they run. */
  readonly unavailable: string | null;
}

declare module 'vitest' {
  export interface ProvidedContext {
    docker: DockerTestContext;
  }
}

/** A directory bind-mounted on itself and made shared: workspaces live inside it, as the contract says. */
export interface SharedParent {
  readonly dir: string;
  /** A fresh workspace + state directory inside the shared parent. */
  fixture(): Promise<WorkspaceFixture>;
  /** Lazily unmounts the parent (and anything mounted below it) and removes it. */
  cleanup(): Promise<void>;
}

/** Creates the shared parent (needs root). */
export async function createSharedParent(): Promise<SharedParent> {
  const dir = await mkdtemp(join(tmpdir(), 'af-docker-'));
  await execa('mount', ['--bind', dir, dir]);
  await execa('mount', ['--make-shared', dir]);
  let n = 0;
  return {
    dir,
    fixture: async () => {
      const root = join(dir, `sb${n++}`);
      const workspaceHostPath = join(root, 'ws');
      const stateDir = join(root, 'state');
      await mkdir(workspaceHostPath, { recursive: true });
      await mkdir(stateDir, { recursive: true });
      // The container runs as SANDBOX_USER. The real workspace is the FUSE mount (allow_other), which lets the
      // sandbox user write where the rules allow; a plain directory stands in for it, owned by that user.
      const [uid, gid] = SANDBOX_USER.split(':').map(Number);
      await chown(workspaceHostPath, uid ?? 0, gid ?? 0);
      return { workspaceHostPath, stateDir, cleanup: () => rm(root, { recursive: true, force: true }) };
    },
    cleanup: async () => {
      await execa('umount', ['--lazy', dir]);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Ids of containers (any state) of this sandbox: labelled with its id (a fresh container), or named for it
 * (a pooled container claimed by it: labels are fixed at creation, the claim renames it).
 */
export async function containersOf(dockerHost: string, sandboxId: string): Promise<string[]> {
  const ps = async (filter: string): Promise<string[]> =>
    (
      await execa('docker', ['ps', '--all', '--quiet', '--no-trunc', '--filter', filter], {
        env: { DOCKER_HOST: dockerHost },
      })
    ).stdout
      .split('\n')
      .filter(Boolean);
  const [labelled, named] = await Promise.all([
    ps(`label=${SANDBOX_LABEL}=${sandboxId}`),
    ps(`name=^/?agentfense-${sandboxId}$`),
  ]);
  return [...new Set([...labelled, ...named])];
}

/** Ids of the pooled containers (idle or claimed) owned by this process. */
export async function pooledContainers(dockerHost: string): Promise<string[]> {
  const r = await execa(
    'docker',
    ['ps', '--all', '--no-trunc', '--filter', `label=${POOL_OWNER_LABEL}`, '--format', '{{.ID}} {{.Labels}}'],
    { env: { DOCKER_HOST: dockerHost } },
  );
  const self = `${POOL_OWNER_LABEL}=${String(process.pid)}:`;
  return r.stdout
    .split('\n')
    .filter((line) => line.includes(self))
    .map((line) => line.split(' ')[0] ?? '');
}
