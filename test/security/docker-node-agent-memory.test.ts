// Attack: on a cluster node, grow the sandbox's FUSE worker (a root process of the node agent, outside the
// sandbox container's cgroups) until the node runs short of memory for its other sandboxes. Reading a
// large file through the worker makes it hold the file at once (a sparse 320 MiB file here; names and
// listings of a deep tree do the same, test/security/worker-memory.test.ts). Defence: as on a single host,
// the node agent puts each worker in a memory cgroup of its own (agentfense-workers/<sandbox id>) bounded
// by workerMemoryBound of the sandbox's memory limit, before it mounts; past it the kernel kills that
// worker alone (supervision replaces it, in the same cgroup), the node agent and its other sandboxes
// carry on, and detach removes the cgroup.
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { WORKER_CGROUP_PARENT, workerMemoryBound } from '@agentfense/fuse-worker';
import { detectCgroupHost } from '@agentfense/protocol';
import {
  call,
  createSandboxContainer,
  removeContainer,
  randomToken,
  startAgent,
  type AgentProcess,
} from '#helpers/node-agent.js';

const MiB = 1024 * 1024;
const docker = inject('docker');
const dockerHost = docker.dockerHost ?? '';
const host = await detectCgroupHost();
const memory =
  host.v2?.controllers.has('memory') === true
    ? { root: host.v2.path, limitFile: 'memory.max' }
    : host.v1.has('memory')
      ? { root: host.v1.get('memory') as string, limitFile: 'memory.limit_in_bytes' }
      : null;
const skipped = docker.unavailable ?? (memory === null ? 'no cgroup memory controller on this host' : null);

describe.skipIf(skipped !== null)(
  `a node agent's worker is bounded and charged to its sandbox${skipped === null ? '' : ` (skipped: ${skipped})`}`,
  () => {
    let root: string;
    let agent: AgentProcess | undefined;
    const token = randomToken();
    const containers: string[] = [];

    beforeAll(async () => {
      root = await mkdtemp(join(tmpdir(), 'af-node-worker-memory-'));
      const codebase = join(root, 'codebases', 'app');
      await mkdir(codebase, { recursive: true });
      await writeFile(join(codebase, 'readme.txt'), 'hello\n');
      await writeFile(join(codebase, 'big.bin'), '');
      await truncate(join(codebase, 'big.bin'), 320 * MiB);
      agent = await startAgent({
        stateDir: join(root, 'state'),
        codebaseRoot: join(root, 'codebases'),
        token,
        tokenFile: join(root, 'token'),
        dockerHost,
      });
    });

    afterAll(async () => {
      await agent?.stop();
      for (const id of containers) await removeContainer(dockerHost, id);
      await rm(root, { recursive: true, force: true });
    });

    it('the worker runs in its own cgroup with the bound; over it, only that worker dies', async () => {
      const sandboxId = `sb_${randomUUID()}`;
      containers.push(await createSandboxContainer(dockerHost, sandboxId));
      // No memoryBytes in the attach: the default sandbox limit's bound applies, never none.
      const attached = await call(agent!, token, 'POST', '/v1/sandboxes', {
        sandboxId,
        codebasePath: join(root, 'codebases', 'app'),
        rules: [{ pattern: '**', permission: 'write' }],
        memoryBytes: 0,
      });
      expect(attached.status, attached.text).toBe(201);
      const pidFile = join(root, 'state', 'sandboxes', sandboxId, 'worker.pid');
      const worker = Number((await readFile(pidFile, 'utf8')).split(' ')[0]);
      const dir = posix.join(memory!.root, WORKER_CGROUP_PARENT, sandboxId);
      const bound = workerMemoryBound(0);
      expect(bound).toBe(256 * MiB);
      expect(Number(await readFile(posix.join(dir, memory!.limitFile), 'utf8'))).toBe(bound);
      expect((await readFile(posix.join(dir, 'cgroup.procs'), 'utf8')).split('\n')).toContain(String(worker));

      // 320 MiB held at once is past the bound: the read fails saying so, the node agent answers on, and
      // supervision puts a new worker in the same cgroup over the same delta.
      const read = await call(agent!, token, 'GET', `/v1/sandboxes/${sandboxId}/files?path=big.bin`);
      expect(read.status).not.toBe(200);
      expect(read.text).toContain('went over its memory bound');
      let restarted:
        { id: string; alive: boolean; worker: { restarts: number; lastRestartReason?: string } } | undefined;
      for (;;) {
        const health = await call(agent!, token, 'GET', '/v1/health');
        expect(health.status).toBe(200);
        [restarted] = health.json['sandboxes'] as (typeof restarted)[];
        if (
          restarted?.worker.restarts === 1 &&
          (await readFile(pidFile, 'utf8')).split(' ')[0] !== `${worker}`
        )
          break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(restarted).toMatchObject({ id: sandboxId, alive: true });
      expect(restarted?.worker.lastRestartReason).toMatch(/went over its memory bound of 256 MiB/);
      const replacement = (await readFile(pidFile, 'utf8')).split(' ')[0];
      expect((await readFile(posix.join(dir, 'cgroup.procs'), 'utf8')).split('\n')).toContain(replacement);
      const events = await readFile(
        posix.join(dir, memory!.limitFile === 'memory.max' ? 'memory.events' : 'memory.oom_control'),
        'utf8',
      );
      expect(Number(/^oom_kill (\d+)$/m.exec(events)?.[1] ?? 0)).toBeGreaterThan(0);

      // Detach takes the cgroup with it.
      expect((await call(agent!, token, 'DELETE', `/v1/sandboxes/${sandboxId}`)).status).toBe(200);
      await expect(readFile(posix.join(dir, 'cgroup.procs'), 'utf8')).rejects.toMatchObject({
        code: 'ENOENT',
      });
    }, 120_000);
  },
);
