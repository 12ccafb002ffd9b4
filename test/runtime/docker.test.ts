// The runtime contract against a real Docker engine (started by test/helpers/docker-setup.ts when none is
// running), plus what only docker has: engine and image errors, the container's hardening, limits as the
// engine applies them, kills that work with the pids limit exhausted, the in-container kill fallback,
// mount propagation into a running container (latency is `pnpm bench:docker`'s).
import { randomUUID } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { InvalidArgumentError, UnavailableError, WrongStateError } from '@agentfense/protocol';
import type { RuntimeInstance, RuntimeStartOptions } from '@agentfense/protocol';
import {
  DOCKER_SECCOMP_PROFILE,
  SANDBOX_USER,
  containerName,
  createDockerRuntime,
  resolveContainerCgroup,
} from '@agentfense/runtime-docker';
import type { DockerRuntimeOptions } from '@agentfense/runtime-docker';
import { containersOf, createSharedParent } from '#helpers/docker.js';
import type { SharedParent } from '#helpers/docker.js';
import type { WorkspaceFixture } from './contract.js';
import { expectNoProcessWith, hostProcessesWith, runRuntimeContract } from './contract.js';

const docker = inject('docker');
const dockerHost = docker.dockerHost ?? '';
const quiet = { debug: () => undefined, warn: (obj: object, msg: string) => console.warn(msg, obj) };

/** Options every runtime of this file uses: the test engine. */
const base: DockerRuntimeOptions = { dockerHost, logger: quiet };

let parent: Promise<SharedParent> | undefined;
const sharedParent = (): Promise<SharedParent> => (parent ??= createSharedParent());
afterAll(async () => {
  if (parent !== undefined) await (await parent).cleanup();
});
const fixture = async (): Promise<WorkspaceFixture> => (await sharedParent()).fixture();

/** `docker <args>` against the test engine. */
async function dockerCli(args: string[]): Promise<string> {
  const r = await execa('docker', args, { env: { DOCKER_HOST: dockerHost } });
  return r.stdout;
}

describe.skipIf(docker.unavailable !== null)(
  `docker runtime${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    // One runtime for the whole suite: its engine check (docker info, image inspect) is cached. Its
    // container pool is on, so most sandboxes here run in a pooled container (docker-pool.test.ts checks
    // that they are indistinguishable from fresh ones); runtimes with other options start fresh ones.
    const runtime = createDockerRuntime({ ...base, poolSize: 2 });
    afterAll(() => runtime.close());

    runRuntimeContract({
      name: 'docker',
      makeRuntime: (extra) => (extra === undefined ? runtime : createDockerRuntime({ ...base, ...extra })),
      workspace: fixture,
      leftovers: (sandboxId) => containersOf(dockerHost, sandboxId),
    });

    describe('docker only', () => {
      async function start(
        extra: Partial<RuntimeStartOptions> = {},
        options: DockerRuntimeOptions = {},
      ): Promise<{ sb: RuntimeInstance; sandboxId: string; fixture: WorkspaceFixture }> {
        const fx = await fixture();
        const sandboxId = `sb_${randomUUID()}`;
        const rt = Object.keys(options).length === 0 ? runtime : createDockerRuntime({ ...base, ...options });
        const sb = await rt.start({
          sandboxId,
          workspaceHostPath: fx.workspaceHostPath,
          stateDir: fx.stateDir,
          ...extra,
        });
        onTestFinished(async () => {
          await sb.stop();
          expect(await containersOf(dockerHost, sandboxId)).toEqual([]);
          await fx.cleanup();
        });
        return { sb, sandboxId, fixture: fx };
      }

      describe('engine and image errors', () => {
        it('no engine: check() and start() throw UnavailableError naming `agentfense setup docker`', async () => {
          const rt = createDockerRuntime({ ...base, dockerHost: 'unix:///nonexistent/docker.sock' });
          const err: unknown = await rt.check().catch((e: unknown) => e);
          expect(err).toBeInstanceOf(UnavailableError);
          expect((err as UnavailableError).code).toBe('AF_UNAVAILABLE');
          expect((err as Error).message).toMatch(/no Docker engine answers at unix:\/\/\/nonexistent/);
          expect((err as Error).message).toContain('agentfense setup docker');
          const fx = await fixture();
          onTestFinished(() => fx.cleanup());
          await expect(
            rt.start({
              sandboxId: 'sb_noengine',
              workspaceHostPath: fx.workspaceHostPath,
              stateDir: fx.stateDir,
            }),
          ).rejects.toThrow(/agentfense setup docker/);
        });

        it('needs no docker CLI at run time: the Engine API over the socket is enough', async () => {
          // A docker CLI that does not exist: check(), start() and exec() never look for one.
          const rt = createDockerRuntime({ ...base, dockerPath: '/nonexistent/docker' });
          await rt.check();
          const fx = await fixture();
          onTestFinished(() => fx.cleanup());
          const sb = await rt.start({
            sandboxId: 'sb_nocli',
            workspaceHostPath: fx.workspaceHostPath,
            stateDir: fx.stateDir,
          });
          onTestFinished(() => sb.stop());
          const r = await sb.exec({ command: ['sh', '-c', 'echo out; echo err >&2; exit 3'] });
          expect([r.stdout.toString(), r.stderr.toString(), r.exitCode]).toEqual(['out\n', 'err\n', 3]);
        });

        it('missing default image: check() names `agentfense setup docker`', async () => {
          const rt = createDockerRuntime({ ...base, image: 'agentfense/missing-image-af:latest' });
          await expect(rt.check()).rejects.toThrow(UnavailableError);
          await expect(rt.check()).rejects.toThrow(/agentfense\/missing-image-af:latest is not available/);
        });

        it('missing per-sandbox image: start() fails clearly, never pulls, leaves no container', async () => {
          const fx = await fixture();
          onTestFinished(() => fx.cleanup());
          const sandboxId = `sb_${randomUUID()}`;
          const err: unknown = await runtime
            .start({
              sandboxId,
              workspaceHostPath: fx.workspaceHostPath,
              stateDir: fx.stateDir,
              image: 'agentfense/missing-image-af:1',
            })
            .catch((e: unknown) => e);
          expect(err).toBeInstanceOf(UnavailableError);
          expect((err as Error).message).toMatch(/never pulls/);
          expect(await containersOf(dockerHost, sandboxId)).toEqual([]);
        });

        it('refuses image references that could read as options', async () => {
          const fx = await fixture();
          onTestFinished(() => fx.cleanup());
          await expect(
            runtime.start({
              sandboxId: 'sb_badimage',
              workspaceHostPath: fx.workspaceHostPath,
              stateDir: fx.stateDir,
              image: '--privileged',
            }),
          ).rejects.toThrow(InvalidArgumentError);
        });

        it('a workspace outside any shared mount is refused with how to fix it, leaving no container', async () => {
          const { mkdtemp, rm } = await import('node:fs/promises');
          const { tmpdir } = await import('node:os');
          const dir = await mkdtemp(join(tmpdir(), 'af-docker-private-'));
          onTestFinished(() => rm(dir, { recursive: true, force: true }));
          const sandboxId = `sb_${randomUUID()}`;
          const err: unknown = await runtime
            .start({ sandboxId, workspaceHostPath: dir, stateDir: dir })
            .catch((e: unknown) => e);
          expect(err).toBeInstanceOf(InvalidArgumentError);
          expect((err as Error).message).toMatch(/make-shared/);
          expect(await containersOf(dockerHost, sandboxId)).toEqual([]);
        });

        it('a stale container with the same sandbox id (crashed control plane) is replaced', async () => {
          const { sb: first, sandboxId, fixture: fx } = await start();
          const second = await runtime.start({
            sandboxId,
            workspaceHostPath: fx.workspaceHostPath,
            stateDir: fx.stateDir,
          });
          onTestFinished(() => second.stop());
          expect((await second.exec({ command: 'echo ok' })).stdout.toString()).toBe('ok\n');
          await expect(first.exec({ command: 'true' })).rejects.toThrow(WrongStateError);
          expect(await containersOf(dockerHost, sandboxId)).toHaveLength(1);
        });
      });

      describe('the launcher (af-init as pid 1)', () => {
        it('runs exec through af-init: the command is a child of pid 1, in its own session', async () => {
          const { sb } = await start();
          const r = await sb.exec({
            command: 'grep -E "^(PPid|NSsid|NSpid)" /proc/$$/status | tr -s "\\t" " "',
          });
          const [ppid, nspid, nssid] = r.stdout.toString().trim().split('\n');
          expect(ppid).toBe('PPid: 1');
          expect(nssid?.split(' ').at(-1)).toBe(nspid?.split(' ').at(-1));
        });

        it('gives a command the same environment as an engine exec (sessions still use those)', async () => {
          const { sb } = await start({ env: { SANDBOX_VAR: 'v' } });
          const viaInit = await sb.exec({ command: ['env'], env: { EXEC_VAR: 'e' } });
          const proc = await sb.spawn({ argv: ['env'], env: { EXEC_VAR: 'e' } });
          const chunks: Buffer[] = [];
          proc.stdout.on('data', (c: Buffer) => chunks.push(c));
          await proc.wait();
          // PWD is the session wrapper's shell's own export (a shell command sets it itself either way).
          const sorted = (s: string): string[] =>
            s
              .split('\n')
              .filter((l) => l !== '' && !l.startsWith('PWD='))
              .sort();
          expect(sorted(viaInit.stdout.toString())).toEqual(sorted(Buffer.concat(chunks).toString()));
          expect(sorted(viaInit.stdout.toString())).toContain('SANDBOX_VAR=v');
        });

        it('a command that cannot start reports 127 (not found) or 126 (not executable) with the reason', async () => {
          const { sb } = await start();
          const missing = await sb.exec({ command: ['no-such-command-af'] });
          expect(missing.exitCode).toBe(127);
          expect(missing.stderr.toString()).toMatch(/no-such-command-af: exec: No such file or directory/);
          const notExec = await sb.exec({ command: ['/etc/passwd'] });
          expect(notExec.exitCode).toBe(126);
        });

        it('with `launcher: false` every command is an engine exec under the session wrapper, as before', async () => {
          const { sb } = await start({}, { launcher: false, poolSize: 0 });
          const r = await sb.exec({
            command: 'grep PPid /proc/$$/status; cat /proc/1/cmdline | tr "\\0" " "',
          });
          expect(r.stdout.toString()).not.toMatch(/^PPid:\s+1$/m);
          expect(r.stdout.toString()).toContain('/sbin/docker-init -- sleep infinity');
        });
      });

      describe('the container', () => {
        it('runs as the dedicated uid without capabilities or privilege gain, on a read-only image', async () => {
          const { sb } = await start();
          const r = await sb.exec({
            command: [
              'id -u',
              'grep -E "^(CapEff|CapPrm|CapBnd|NoNewPrivs)" /proc/self/status | tr -s "\\t " " "',
              'hostname',
              'touch /usr/af-probe 2>/dev/null && echo usr-writable',
              'touch /af-probe 2>/dev/null && echo root-writable',
              'touch /tmp/ok && echo tmp-writable',
              'touch "$HOME/ok" && echo home-writable',
              'echo "$HOME"',
              'cat /proc/1/cmdline | tr "\\0" " "',
            ].join('; '),
          });
          expect(r.stderr.toString()).toBe('');
          expect(r.stdout.toString().split('\n')).toEqual([
            SANDBOX_USER.split(':')[0],
            'CapPrm: 0000000000000000',
            'CapEff: 0000000000000000',
            'CapBnd: 0000000000000000',
            'NoNewPrivs: 1',
            'agentfense',
            'tmp-writable',
            'home-writable',
            '/home/agent',
            // pid 1 is af-init, the launcher (packages/launcher/native/af-init.c); no host path in its argv.
            '/.agentfense/af-init --connect /.agentfense/sock ',
          ]);
        });

        it('commands start with SIGINT and SIGQUIT at their defaults (the wrapper backgrounds them)', async () => {
          const { sb } = await start();
          const r = await sb.exec({ command: 'grep SigIgn /proc/$$/status' });
          const mask = BigInt(`0x${/SigIgn:\s+([0-9a-f]+)/.exec(r.stdout.toString())?.[1] ?? 'ff'}`);
          expect(mask & 0b110n).toBe(0n); // bit 1: SIGINT, bit 2: SIGQUIT
        });

        it('is created with the promised flags (inspected from the engine)', async () => {
          const { sb } = await start({
            resources: { memoryBytes: 96 * 1024 * 1024, pidsLimit: 64, cpuQuota: 50_000, cpuShares: 512 },
          });
          const config = JSON.parse(
            await dockerCli(['inspect', '--format', '{{json .HostConfig}}', containerName(sb.sandboxId)]),
          ) as Record<string, unknown>;
          expect(config).toMatchObject({
            NetworkMode: 'none',
            ReadonlyRootfs: true,
            CapDrop: ['ALL'],
            // The shared seccomp deny list replaces the engine's default profile.
            SecurityOpt: ['no-new-privileges', `seccomp=${DOCKER_SECCOMP_PROFILE}`],
            // af-init is pid 1 and reaps orphans itself; docker's init would make it killable from inside.
            Init: false,
            Memory: 96 * 1024 * 1024,
            PidsLimit: 64,
            CpuQuota: 50_000,
            CpuPeriod: 100_000,
            CpuShares: 512,
            Privileged: false,
          });
          expect(sb.limits).toEqual({
            memoryBytes: 96 * 1024 * 1024,
            pidsLimit: 64,
            cpuQuota: 50_000,
            cpuShares: 512,
            tmpBytes: null,
            mechanism: 'docker',
          });
        });

        it('never reaches the host loopback: the container has a namespace of its own', async () => {
          let connections = 0;
          const server = createServer((socket) => {
            connections += 1;
            socket.end();
          });
          await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
          onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
          const { port } = server.address() as AddressInfo;
          const command = `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}; cat <&3'`;
          const { sb: off } = await start();
          expect((await off.exec({ command, timeoutMs: 10_000 })).exitCode).not.toBe(0);
          expect(connections).toBe(0);
        });

        it('audit: the container and the exec, masked and redacted, with the wrapper shortened', async () => {
          const { sb } = await start({ env: { API_TOKEN: 'hunter2' } });
          const r = await sb.exec({ command: ['true'], env: { EXEC_SECRET: 's3cret' } });
          const argv = r.audit.argv;
          expect(argv.slice(0, 2)).toEqual(['docker', 'run']);
          expect(argv).toContain('&&');
          expect(argv).toContain('--network');
          expect(argv[argv.indexOf('--network') + 1]).toBe('none');
          expect(argv).toContain('type=bind,source=<workspace>,target=/workspace,bind-propagation=rslave');
          expect(argv).toContain('API_TOKEN=<redacted>');
          expect(argv).toContain('EXEC_SECRET=<redacted>');
          expect(argv).toContain('<agentfense-session-wrapper>');
          expect(argv.slice(-1)).toEqual(['true']);
          expect(argv.join(' ')).not.toMatch(/hunter2|s3cret/);
        });
      });

      describe('kills', () => {
        it('a timeout kills a fork bomb held at the pids limit, and the sandbox stays usable', async () => {
          const { sb } = await start({ resources: { pidsLimit: 30 } });
          const marker = `af_bomb_${randomUUID()}`;
          // perl's fork returns undef at the limit and the loop goes on. A shell is no good here: dash
          // exits at the first failed fork, and bash gives up when a fork is interrupted (EINTR), so the
          // bomb could end on its own before the timeout.
          const bomb = `while (1) { my $p = fork; exec('sh', '-c', 'sleep 1000; : ${marker}') if defined $p && $p == 0 }`;
          const r = await sb.exec({
            command: ['perl', '-e', bomb],
            timeoutMs: 2_000,
          });
          expect(r.timedOut).toBe(true);
          await expectNoProcessWith(marker);
          expect((await sb.exec({ command: 'echo ok' })).stdout.toString()).toBe('ok\n');
        });

        it('a session still forking after the kill rounds is killed with the container frozen; af-init lives on', async () => {
          // The host kills a command's session from the container's cgroup in rounds; a bomb can fork between
          // a round's read of cgroup.procs and its kills. One round (instead of 50) makes the frozen kill
          // certain to be needed: without it, killSession gave up (false) and the session lived on.
          const { sb, sandboxId } = await start({ resources: { pidsLimit: 64 } });
          const marker = `af_frozen_${randomUUID()}`;
          // Every child is a copy of perl (its argv carries the marker) that sleeps: each holds a pid until
          // killed, and perl keeps forking into every slot the kills free.
          const bomb = `$| = 1; print getpgrp(), "\\n"; while (1) { my $p = fork; if (defined $p && $p == 0) { sleep 1000; exit } } # ${marker}`;
          let printed!: (session: number) => void;
          const session = new Promise<number>((resolve) => (printed = resolve));
          const running = sb.exec({
            command: ['perl', '-e', bomb],
            timeoutMs: 50_000,
            onStdout: (chunk) => printed(Number(chunk.toString().trim())),
          });
          const sessionId = await session;
          expect(sessionId).toBeGreaterThan(1);
          // Wait for the bomb to fill the container (up to the pids limit).
          const deadline = Date.now() + 20_000;
          let seen = 0;
          while (seen < 20 && Date.now() < deadline) {
            seen = (await hostProcessesWith(marker)).length;
            if (seen < 20) await new Promise((resolve) => setTimeout(resolve, 50));
          }
          expect(seen).toBeGreaterThanOrEqual(20);
          const initPid = Number(
            await dockerCli(['inspect', '--format', '{{.State.Pid}}', containerName(sandboxId)]),
          );
          const cgroup = await resolveContainerCgroup({ initPid, killRounds: 1 });
          expect(cgroup).not.toBeNull();
          expect(await cgroup?.killSession(sessionId)).toBe(true);
          const r = await running;
          expect(r.timedOut).toBe(false);
          await expectNoProcessWith(marker);
          // Thawed: af-init (pid 1) and the sandbox carry on.
          expect((await sb.exec({ command: 'echo ok' })).stdout.toString()).toBe('ok\n');
        });

        it('a process that left the process group (setpgid) but not the session dies with the command', async () => {
          const { sb } = await start();
          const marker = `af_pgid_${randomUUID()}`;
          // bash's job control (set -m) puts the background job in its own process group.
          const r = await sb.exec({
            command: ['bash', '-c', `set -m; sh -c 'sleep 1000; : ${marker}' >/dev/null 2>&1 & echo started`],
          });
          expect(r.stdout.toString()).toBe('started\n');
          await expectNoProcessWith(marker);
        });

        it('without the host view of the cgroup, the in-container kill script ends a timed-out tree', async () => {
          const { sb } = await start({}, { hostCgroup: false });
          const marker = `af_fallback_${randomUUID()}`;
          let during: Promise<number[]> = Promise.resolve([]);
          const r = await sb.exec({
            command: `sh -c 'sleep 1000; : ${marker}' & sh -c 'sleep 1000; : ${marker}' & echo started; wait`,
            timeoutMs: 1_500,
            onStdout: () => {
              during = hostProcessesWith(marker);
            },
          });
          expect((await during).length).toBeGreaterThanOrEqual(2);
          expect(r.timedOut).toBe(true);
          await expectNoProcessWith(marker);
          expect((await sb.exec({ command: 'echo ok' })).stdout.toString()).toBe('ok\n');
        });
      });

      describe('mount propagation (rslave)', () => {
        /** Mounts a tmpfs at `dir` holding `file` with `text`; unmounted when the test ends. */
        async function mountTmpfs(dir: string, file: string, text: string): Promise<void> {
          await mkdir(dir, { recursive: true });
          await execa('mount', ['-t', 'tmpfs', 'af-test', dir]);
          onTestFinished(async () => {
            await execa('umount', ['--lazy', dir], { reject: false });
          });
          await writeFile(join(dir, file), text);
        }

        it('a mount made under the workspace after start appears inside the running container', async () => {
          const { sb, fixture: fx } = await start();
          expect((await sb.exec({ command: 'ls /workspace' })).stdout.toString()).toBe('');
          await mountTmpfs(join(fx.workspaceHostPath, 'sub'), 'f', 'mounted later\n');
          const r = await sb.exec({ command: 'cat /workspace/sub/f' });
          expect(r.stdout.toString()).toBe('mounted later\n');
        });

        it('a FUSE-like mount that exists at start is followed through unmount and remount (crashed worker)', async () => {
          // The control plane's layout: the worker's mount is already at the workspace when the container
          // starts; after a crash it is unmounted and a new one mounted at the same path.
          const fx = await fixture();
          onTestFinished(() => fx.cleanup());
          await mountTmpfs(fx.workspaceHostPath, 'f', 'first worker\n');
          await execa('chown', ['1000:1000', fx.workspaceHostPath]);
          const sb = await runtime.start({
            sandboxId: `sb_${randomUUID()}`,
            workspaceHostPath: fx.workspaceHostPath,
            stateDir: fx.stateDir,
          });
          onTestFinished(() => sb.stop());
          expect((await sb.exec({ command: 'cat f; echo new > g' })).stdout.toString()).toBe(
            'first worker\n',
          );
          expect(await readFile(join(fx.workspaceHostPath, 'g'), 'utf8')).toBe('new\n');
          await execa('umount', ['--lazy', fx.workspaceHostPath]); // the worker crashed and was cleared
          expect((await sb.exec({ command: 'ls -A /workspace' })).stdout.toString()).toBe('');
          await mountTmpfs(fx.workspaceHostPath, 'f', 'second worker\n');
          expect((await sb.exec({ command: 'cat /workspace/f' })).stdout.toString()).toBe('second worker\n');
        });

        it('a workspace that is its own shared mount follows a mount, unmount and remount at its root', async () => {
          // The layout that lets a crashed worker be remounted under a running container: the workspace
          // directory is a shared mount when the container starts, and the FUSE mount is (re)made on it.
          const fx = await fixture();
          await execa('mount', ['--bind', fx.workspaceHostPath, fx.workspaceHostPath]);
          await execa('mount', ['--make-shared', fx.workspaceHostPath]);
          onTestFinished(async () => {
            await execa('umount', ['--lazy', fx.workspaceHostPath], { reject: false });
            await fx.cleanup();
          });
          const sb = await runtime.start({
            sandboxId: `sb_${randomUUID()}`,
            workspaceHostPath: fx.workspaceHostPath,
            stateDir: fx.stateDir,
          });
          onTestFinished(() => sb.stop());
          await mountTmpfs(fx.workspaceHostPath, 'f', 'first worker\n');
          expect((await sb.exec({ command: 'cat /workspace/f' })).stdout.toString()).toBe('first worker\n');
          await execa('umount', ['--lazy', fx.workspaceHostPath]); // the tmpfs: the "crashed worker"
          await mountTmpfs(fx.workspaceHostPath, 'f', 'second worker\n');
          expect((await sb.exec({ command: 'cat /workspace/f' })).stdout.toString()).toBe('second worker\n');
          expect(await readFile(join(fx.workspaceHostPath, 'f'), 'utf8')).toBe('second worker\n');
        });
      });
    });
  },
);
