// The docker runtime's container pool (packages/runtime-docker/src/container/pool.ts) against a real engine: a
// sandbox served from the pool is indistinguishable in security from a fresh one (flags as the engine
// reports them, limits, env, what a command sees), a pooled container serves one sandbox and is removed
// with it, a sandbox with files bypasses the pool, and close(), recovery and gc leave nothing behind.
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import type { RuntimeInstance, RuntimeStartOptions } from '@agentfense/protocol';
import { POOL_OWNER_LABEL, containerName, createDockerRuntime } from '@agentfense/runtime-docker';
import type { DockerRuntime, DockerRuntimeOptions } from '@agentfense/runtime-docker';
import { containersOf, createSharedParent, pooledContainers } from '#helpers/docker.js';
import type { SharedParent } from '#helpers/docker.js';

const docker = inject('docker');
const dockerHost = docker.dockerHost ?? '';
const quiet = { debug: () => undefined, warn: (obj: object, msg: string) => console.warn(msg, obj) };

let parent: Promise<SharedParent> | undefined;
const sharedParent = (): Promise<SharedParent> => (parent ??= createSharedParent());
afterAll(async () => {
  if (parent !== undefined) await (await parent).cleanup();
});

async function dockerCli(args: string[]): Promise<string> {
  return (await execa('docker', args, { env: { DOCKER_HOST: dockerHost } })).stdout;
}

/** The engine's view of a container: the fields that make up its isolation. */
async function isolation(container: string): Promise<Record<string, unknown>> {
  const info = JSON.parse(await dockerCli(['inspect', container])) as {
    Config: Record<string, unknown>;
    HostConfig: Record<string, unknown>;
  }[];
  const { Config: c, HostConfig: h } = info[0] ?? { Config: {}, HostConfig: {} };
  const pick = (o: Record<string, unknown>, keys: string[]): Record<string, unknown> =>
    Object.fromEntries(keys.map((k) => [k, o[k]]));
  return {
    ...pick(c, ['User', 'Hostname', 'WorkingDir', 'Entrypoint', 'Cmd', 'Image']),
    ...pick(h, [
      'NetworkMode',
      'CapDrop',
      'CapAdd',
      'SecurityOpt',
      'Privileged',
      'ReadonlyRootfs',
      'Init',
      'IpcMode',
      'CgroupnsMode',
      'Tmpfs',
      'Memory',
      'MemorySwap',
      'PidsLimit',
      'CpuQuota',
      'CpuPeriod',
      'CpuShares',
    ]),
    Mounts: (h['Mounts'] as { Type: string; Target: string; ReadOnly: boolean; BindOptions: unknown }[]).map(
      (m) => ({ Type: m.Type, Target: m.Target, ReadOnly: m.ReadOnly, BindOptions: m.BindOptions }),
    ),
  };
}

/** What a command inside sees of its confinement. */
const PROBE = [
  'id',
  'grep -E "^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp)" /proc/self/status | tr -s "\\t " " "',
  'hostname',
  'echo "env: $SANDBOX_SECRET $HOME $LANG $TERM"',
  'cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/memory/memory.limit_in_bytes',
  'cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.shares',
  'ls /sys/class/net',
  'touch /usr/x 2>&1 | sed "s/.*: //"',
  'df -k /tmp | tail -1 | tr -s " " | cut -d" " -f2',
  'ls -A /workspace',
].join('; ');

describe.skipIf(docker.unavailable !== null)(
  `docker container pool${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    const base: DockerRuntimeOptions = { dockerHost, logger: quiet };
    const pooled = createDockerRuntime({ ...base, poolSize: 2 });
    const fresh = createDockerRuntime(base);
    afterAll(async () => {
      await pooled.close();
      expect(await pooledContainers(dockerHost)).toEqual([]);
    });

    async function start(
      rt: DockerRuntime,
      extra: Partial<RuntimeStartOptions> = {},
    ): Promise<{ sb: RuntimeInstance; id: string }> {
      const fx = await (await sharedParent()).fixture();
      const sandboxId = `sb_${randomUUID()}`;
      const sb = await rt.start({ sandboxId, ...fx, ...extra });
      onTestFinished(async () => {
        await sb.stop();
        expect(await containersOf(dockerHost, sandboxId)).toEqual([]);
        await fx.cleanup();
      });
      const [id] = await containersOf(dockerHost, sandboxId);
      return { sb, id: id ?? '' };
    }

    /** Starts one sandbox so the pool fills for its kind, and waits until it has. */
    async function warm(rt: DockerRuntime, extra: Partial<RuntimeStartOptions> = {}): Promise<string[]> {
      await start(rt, extra);
      await rt.pool.settled();
      expect(rt.pool.idleCount).toBe(rt.pool.size);
      return pooledContainers(dockerHost);
    }

    it('a sandbox from the pool is indistinguishable in security from a fresh one', async () => {
      const idle = await warm(pooled);
      const extra: Partial<RuntimeStartOptions> = {
        env: { SANDBOX_SECRET: 'pool-test' },
        resources: { memoryBytes: 96 * 1024 * 1024, pidsLimit: 64, cpuQuota: 50_000, cpuShares: 512 },
      };
      const a = await start(pooled, extra);
      const b = await start(fresh, extra);
      // It really came from the pool (the claim renamed it), and the other did not.
      expect(idle).toContain(a.id);
      expect(idle).not.toContain(b.id);
      expect(await isolation(a.id)).toEqual(await isolation(b.id));
      expect(await isolation(a.id)).toMatchObject({
        NetworkMode: 'none',
        Memory: 96 * 1024 * 1024,
        PidsLimit: 64,
        CpuQuota: 50_000,
        CpuShares: 512,
      });
      const [ra, rb] = await Promise.all([a.sb.exec({ command: PROBE }), b.sb.exec({ command: PROBE })]);
      expect(ra.stderr.toString()).toBe('');
      expect(ra.stdout.toString()).toBe(rb.stdout.toString());
      expect(ra.stdout.toString()).toContain('env: pool-test /home/agent C.UTF-8 dumb');
      expect(ra.stdout.toString()).toContain(`${String(64)}\n${String(96 * 1024 * 1024)}\n`);
      expect(a.sb.limits).toEqual(b.sb.limits);
      // The audit record says how it came about: created ahead, renamed, limits applied, then the exec.
      expect(ra.audit.argv.join(' ')).toMatch(
        /^docker run .* && docker rename agentfense-pool-\S+ agentfense-sb_\S+ && docker update --memory 100663296 --memory-swap 100663296 --pids-limit 64 --cpu-period 100000 --cpu-quota 50000 --cpu-shares 512 agentfense-sb_\S+ && docker exec .*--env SANDBOX_SECRET=<redacted> /,
      );
      expect(ra.audit.argv.join(' ')).not.toContain('pool-test');
      expect(ra.audit.argv).toContain(
        'type=bind,source=<workspace>,target=/workspace,bind-propagation=rslave',
      );
    });

    it('each pooled container serves one sandbox: stop removes it and the pool makes a new one', async () => {
      const idle = await warm(pooled);
      const { sb, id } = await start(pooled);
      expect(idle).toContain(id);
      await sb.stop();
      expect(await pooledContainers(dockerHost)).not.toContain(id);
      await pooled.pool.settled();
      expect(pooled.pool.idleCount).toBe(pooled.pool.size);
      expect(await pooledContainers(dockerHost)).not.toContain(id);
      // Two sandboxes at once never share a container.
      const [x, y] = await Promise.all([start(pooled), start(pooled)]);
      expect(x.id).not.toBe(y.id);
      await x.sb.exec({ command: 'echo x > /tmp/mine' });
      expect((await y.sb.exec({ command: 'cat /tmp/mine 2>&1; true' })).stdout.toString()).toMatch(
        /No such file/,
      );
    });

    it('recovery finds a claimed container by its marker and removes it with its slot', async () => {
      await warm(pooled);
      const fx = await (await sharedParent()).fixture();
      onTestFinished(() => fx.cleanup());
      const sandboxId = `sb_${randomUUID()}`;
      const sb = await pooled.start({ sandboxId, ...fx });
      const [id] = await containersOf(dockerHost, sandboxId);
      expect(await pooledContainers(dockerHost)).toContain(id);
      // Another process recovering this sandbox (the owner crashed): only the stateDir is known.
      await fresh.clearLeftovers(fx.stateDir);
      expect(await containersOf(dockerHost, sandboxId)).toEqual([]);
      expect(await readdir(join(fx.stateDir, 'docker'))).toEqual([]);
      await sb.stop(); // idempotent: nothing left to remove
    });

    it('close() removes the idle containers and the pool directory', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'af-docker-pooldir-'));
      onTestFinished(() => rm(dir, { recursive: true, force: true }));
      const rt = createDockerRuntime({ ...base, poolSize: 1, poolDir: dir });
      await pooled.pool.settled(); // the other runtime's refill would change the count below
      const before = await pooledContainers(dockerHost);
      await start(rt);
      await rt.pool.settled();
      expect(rt.pool.idleCount).toBe(1);
      expect((await pooledContainers(dockerHost)).length).toBe(before.length + 1);
      await rt.close();
      expect((await pooledContainers(dockerHost)).sort()).toEqual([...before].sort());
      expect(await readdir(dir)).toEqual([]);
    });

    it('prepare() starts creating a container at once, and a start while it is being created takes it', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'af-docker-pooldir-'));
      const rt = createDockerRuntime({ ...base, poolSize: 1, poolDir: dir });
      onTestFinished(async () => {
        await rt.close();
        await rm(dir, { recursive: true, force: true });
      });
      // No sandbox of this kind has started yet: without prepare() the start would make a fresh container.
      rt.prepare?.({});
      const { sb } = await start(rt);
      const r = await sb.exec({ command: ['true'] });
      expect(r.audit.argv.join(' ')).toMatch(/ && docker rename agentfense-pool-\S+ agentfense-sb_\S+ && /);
    });

    it('a sandbox with files gets a fresh container with them bound read-only, even one reserved for it', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'af-docker-pooldir-'));
      let next = 2_000_000_500;
      const rt = createDockerRuntime({
        ...base,
        poolSize: 1,
        poolDir: dir,
        hostUsers: {
          lease: () => ({ uid: next, gid: next, owner: `test-${String(next++)}` }),
          release: () => {},
        },
      });
      onTestFinished(async () => {
        await rt.close();
        await rm(dir, { recursive: true, force: true });
      });
      await pooled.pool.settled(); // the other runtime's refill would change the list below
      const before = await pooledContainers(dockerHost);
      // Its one idle container has a leased uid: reserveUser() sets it aside for the sandbox.
      const idle = (await warm(rt)).filter((c) => !before.includes(c));
      expect(idle).toHaveLength(1);
      const sandboxId = `sb_${randomUUID()}`;
      const reserved = await rt.reserveUser?.({ sandboxId });
      expect(reserved).toBeDefined();
      const fx = await (await sharedParent()).fixture();
      const dest = '/etc/ssl/certs/ca-certificates.crt';
      const sb = await rt.start({
        sandboxId,
        ...fx,
        user: { uid: reserved?.uid ?? 0, gid: reserved?.gid ?? 0 },
        files: [{ dest, content: 'the bundle\n' }],
      });
      onTestFinished(async () => {
        await sb.stop();
        expect(await containersOf(dockerHost, sandboxId)).toEqual([]);
        expect((await readdir(join(fx.stateDir, 'docker'))).filter((e) => e.startsWith('files-'))).toEqual(
          [],
        );
        await fx.cleanup();
      });
      const [id] = await containersOf(dockerHost, sandboxId);
      // Not from the pool, and the container reserved for it is gone.
      expect(idle).not.toContain(id);
      expect(await pooledContainers(dockerHost)).not.toContain(idle[0]);
      const r = await sb.exec({
        command: `id -u; stat -c "%u %a" ${dest}; cat ${dest}; echo x > ${dest} 2>/dev/null || echo refused`,
      });
      expect(r.stdout.toString()).toBe(`${String(reserved?.uid)}\n0 444\nthe bundle\nrefused\n`);
      expect(r.audit.argv).toContainEqual(
        expect.stringMatching(
          new RegExp(`^type=bind,source=<state>/docker/files-[0-9a-f-]+/0,target=${dest},readonly$`),
        ),
      );
    });

    it('gc removes pooled containers whose owner process is gone, never a live owner’s', async () => {
      await warm(pooled);
      const live = await pooledContainers(dockerHost);
      const name = `agentfense-pool-${randomUUID()}`;
      // A pooled container of a process that no longer exists (pid 2^22 + 1 is above pid_max here).
      await dockerCli([
        'create',
        '--name',
        name,
        '--label',
        `${POOL_OWNER_LABEL}=4194305:1`,
        '--network',
        'none',
        'agentfense/base:latest',
        'true',
      ]);
      onTestFinished(async () => {
        await dockerCli(['rm', '-f', name]).catch(() => '');
      });
      const removed = await fresh.collectGarbage();
      expect(removed.join('\n')).toContain(name);
      expect(await dockerCli(['ps', '-aq', '--filter', `name=^/${name}$`])).toBe('');
      expect((await pooledContainers(dockerHost)).sort()).toEqual([...live].sort());
      expect(containerName('sb_x')).toBe('agentfense-sb_x');
    });
  },
);
