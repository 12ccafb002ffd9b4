// Another local user of the host must not reach a running Docker sandbox's workspace either: its relay
// (<stateDir>/docker/relay-*, with the FUSE mount propagated under it), the container pool's slots
// (<dataDir>/docker-pool/...), the rest of the data directory, or /proc of the container's processes
// (they run as a uid no host user has, row 16) and of the worker. The bwrap side is local-users.test.ts.
//
// A real throwaway host user (random name, removed afterwards) tries every path it can build while a
// pooled container runs a command; the data directory's parent is opened to everyone, as /var/lib is.
import { chmod, mkdir, readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { containersOf } from '#helpers/docker.js';
import {
  EXAMPLE_FILES,
  assertCleanAndRemove,
  makeDirs,
  waitFor,
  writeTree,
} from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';
import {
  createLocalUser,
  probeAs,
  processTargets,
  removeLocalUser,
  succeeded,
  targetsUnder,
} from '../helpers/local-user.js';
import type { HostUser, ProbeTarget } from '../helpers/local-user.js';

const docker = inject('docker');

/** Pids in the cgroup of a container (any hierarchy naming its id). */
async function containerPids(containerId: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cgroup = await readFile(`/proc/${entry}/cgroup`, 'utf8').catch(() => '');
    if (cgroup.includes(containerId)) pids.push(Number(entry));
  }
  return pids;
}

describe.skipIf(docker.unavailable !== null)(
  `another local user of the host, docker sandboxes${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    let dirs: TestDirs;
    let cp: ControlPlane;
    let other: HostUser | undefined;
    let id: string;
    let running: Promise<unknown>;
    const marker = `af-docker-local-users-${String(process.pid)}`;
    const savedHost = process.env['DOCKER_HOST'];

    beforeAll(async () => {
      other = await createLocalUser();
      process.env['DOCKER_HOST'] = docker.dockerHost ?? '';
      dirs = await makeDirs();
      await chmod(dirs.root, 0o755);
      const home = join(dirs.root, 'home');
      await mkdir(home, { mode: 0o700 });
      const project = join(home, 'project');
      await writeTree(project, EXAMPLE_FILES);
      cp = await ControlPlane.open({ dataDir: dirs.dataDir, dockerPoolSize: 1 });
      const { id: codebaseId } = await cp.linkCodebase({ path: project });
      // A first sandbox makes the runtime fill its pool; the one under attack is then a pooled container,
      // its workspace bound onto a slot of the pool directory.
      const first = await cp.createSandbox({ codebaseId, preset: 'agent-safe', runtime: 'docker' });
      await cp.startSandbox(first.id);
      // Until one is claimed: a start while the pool is still filling gets a fresh container.
      for (let attempt = 0; ; attempt++) {
        await waitFor('a pool slot', async () => ((await slots()).length > 0 ? true : undefined), 60_000);
        ({ id } = await cp.createSandbox({ codebaseId, preset: 'agent-safe', runtime: 'docker' }));
        await cp.startSandbox(id);
        const scratch = join(dirs.dataDir, 'sandboxes', id, 'state', 'docker');
        if ((await readdir(scratch)).some((n) => n.startsWith('pooled-'))) break;
        if (attempt === 10) throw new Error('no sandbox was served from the pool');
        await cp.destroySandbox(id);
        await sleep(500);
      }
      const wrote = await cp.run(id, 'echo agent-wrote > /workspace/output/agent.txt');
      expect(wrote.exitCode, wrote.stderr).toBe(0);
      running = cp.run(id, `sleep 120; : ${marker}`, { timeoutMs: 110_000 }).catch(() => undefined);
      await waitFor(
        'the running command on the host',
        async () => {
          for (const cid of await containersOf(docker.dockerHost ?? '', id)) {
            for (const pid of await containerPids(cid)) {
              const cmdline = await readFile(`/proc/${String(pid)}/cmdline`, 'utf8').catch(() => '');
              if (cmdline.includes(marker)) return true;
            }
          }
          return undefined;
        },
        30_000,
      );
    }, 120_000);

    /**
     * What the pool's owner directories hold (each is a mount of its own: the walk stops there): slots and
     * launcher directories; `slots()` only the slots.
     */
    async function poolEntries(): Promise<string[]> {
      const pool = join(dirs.dataDir, 'docker-pool');
      const found: string[] = [];
      for (const owner of await readdir(pool).catch(() => [] as string[]))
        for (const entry of await readdir(join(pool, owner)).catch(() => [] as string[]))
          found.push(join(pool, owner, entry));
      return found;
    }
    async function slots(): Promise<string[]> {
      return (await poolEntries()).filter((p) => p.split('/').pop()?.startsWith('slot-'));
    }

    afterAll(async () => {
      try {
        for (const sb of (await cp?.listSandboxes())?.items ?? []) await cp.destroySandbox(sb.id);
        await running;
        await cp?.close();
        if (dirs !== undefined) await assertCleanAndRemove(dirs);
      } finally {
        if (savedHost === undefined) delete process.env['DOCKER_HOST'];
        else process.env['DOCKER_HOST'] = savedHost;
        await removeLocalUser(other);
      }
    }, 120_000);

    it('cannot reach the relay, the pool slots or anything else in the data directory', async () => {
      const data = dirs.dataDir;
      const stateDir = join(data, 'sandboxes', id, 'state');
      const relays = (await readdir(join(stateDir, 'docker'))).filter((n) => n.startsWith('relay-'));
      expect(relays.length, 'the docker relay').toBe(1);
      const relay = join(stateDir, 'docker', relays[0] ?? '');
      const targets: ProbeTarget[] = [
        { path: data, op: 'list' },
        ...(await targetsUnder(data)),
        // behind the mounts the walk does not enter: the relay, with the workspace propagated under it
        { path: join(relay, 'workspace'), op: 'list' },
        { path: join(relay, 'workspace/src/app.py'), op: 'open' },
        { path: join(relay, 'workspace/output/agent.txt'), op: 'open' },
      ];
      // The pool directory's mounts: every slot, the claimed one with the workspace bound onto it.
      for (const slot of await poolEntries()) {
        targets.push(
          { path: slot, op: 'stat' },
          { path: slot, op: 'list' },
          { path: join(slot, 'src/app.py'), op: 'open' },
        );
      }
      const walked = targets.map((t) => t.path.slice(data.length));
      expect(walked.some((p) => /^\/docker-pool\/[^/]+\/slot-/.test(p))).toBe(true);
      expect(walked.some((p) => p.startsWith(`/sandboxes/${id}/delta/`) && p.endsWith('agent.txt'))).toBe(
        true,
      );
      // The relay's workspace and the claimed slot are the mount (root sees the file): a refusal is the defence.
      expect(await readFile(join(relay, 'workspace/src/app.py'), 'utf8')).toBe(EXAMPLE_FILES['src/app.py']);
      const claimed = await Promise.all(
        (await slots()).map((slot) => readFile(join(slot, 'src/app.py'), 'utf8').catch(() => '')),
      );
      expect(claimed).toContain(EXAMPLE_FILES['src/app.py']);
      const results = await probeAs(other as HostUser, targets);
      expect(results).toHaveLength(targets.length);
      expect(succeeded(results)).toEqual([]);
    });

    it("cannot reach the workspace through /proc of the container's processes or of the worker", async () => {
      const [cid] = await containersOf(docker.dockerHost ?? '', id);
      const pids = await containerPids(cid ?? 'none');
      expect(pids.length).toBeGreaterThanOrEqual(2); // init, the command
      const worker = cp.workerPid(id);
      expect(worker).toBeGreaterThan(0);
      const targets = [worker as number, ...pids].flatMap(processTargets);
      const results = await probeAs(other as HostUser, targets);
      expect(succeeded(results)).toEqual([]);
    });
  },
);
