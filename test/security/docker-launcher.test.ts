// Attack: reach the host or the control plane through a docker sandbox's launcher. af-init (the container's
// pid 1) holds a connection to the control plane and runs with the agent's uid, so a hostile agent tries
// to connect to the host's launcher socket itself, to kill af-init, to ptrace it or read its descriptors,
// and to learn host paths from it. Defences (packages/runtime-docker/src/launcher/launcher.ts,
// packages/launcher/native/af-init.c): the host's listener accepts exactly one connection and is closed and
// unlinked; af-init is the pid namespace's init (signals from inside cannot kill it) and not dumpable (no
// ptrace, no /proc access for the same uid); its argv/env name no host path; a dead af-init gives a clear
// error instead of a hang; a command SIGSTOPped between af-init's fork and its exec (the host cannot name it
// yet) is killed at af-init's start deadline and reported, instead of hanging the exec for good. What a hostile af-init could send is covered by
// packages/launcher/test/client.test.ts.
import { randomUUID } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { execa } from 'execa';
import { afterAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import type { RuntimeInstance } from '@agentfense/protocol';
import { createDockerRuntime } from '@agentfense/runtime-docker';
import { containersOf, createSharedParent } from '#helpers/docker.js';
import type { SharedParent } from '#helpers/docker.js';

const docker = inject('docker');
const dockerHost = docker.dockerHost ?? '';
const quiet = { debug: () => undefined, warn: (obj: object, msg: string) => console.warn(msg, obj) };

let parent: Promise<SharedParent> | undefined;
afterAll(async () => {
  if (parent !== undefined) await (await parent).cleanup();
});

async function inspect(container: string): Promise<{
  State: { Pid: number };
  Mounts: { Source: string; Destination: string }[];
}> {
  const r = await execa('docker', ['inspect', container], { env: { DOCKER_HOST: dockerHost } });
  const [info] = JSON.parse(r.stdout) as [
    { State: { Pid: number }; Mounts: { Source: string; Destination: string }[] },
  ];
  return info;
}

describe.skipIf(docker.unavailable !== null)(
  `docker launcher: the agent cannot take over af-init or its connection${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    // Pool on: a pooled container's af-init connected long before its sandbox was known.
    const runtime = createDockerRuntime({
      ...(dockerHost === '' ? {} : { dockerHost }),
      logger: quiet,
      poolSize: 1,
    });
    afterAll(() => runtime.close());

    async function start(): Promise<{ sb: RuntimeInstance; container: string; stateDir: string }> {
      const fx = await (await (parent ??= createSharedParent())).fixture();
      const sandboxId = `sb_${randomUUID()}`;
      const sb = await runtime.start({ sandboxId, ...fx });
      onTestFinished(async () => {
        await sb.stop();
        await fx.cleanup();
      });
      const [container] = await containersOf(dockerHost, sandboxId);
      return { sb, container: container ?? '', stateDir: fx.stateDir };
    }

    it("a command SIGSTOPped before it reached exec is reported failed at af-init's start deadline, not hung", async () => {
      const { sb } = await start();
      // The attacker: a process of the sandbox that watches the pid namespace's last pid and stops every new
      // process at once (pids are sequential and ns_last_pid is readable).
      const attacker = `$| = 1;
        sub lastpid { open(my $f, '<', '/proc/sys/kernel/ns_last_pid') or die "ns_last_pid: $!"; my $v = <$f>; close $f; int($v) }
        my $seen = lastpid(); print "watching\\n";
        while (1) { my $now = lastpid(); if ($now != $seen) { kill 'STOP', $_ for grep { $_ != $$ } $seen + 1 .. $now; $seen = $now } }`;
      const abort = new AbortController();
      let watching!: () => void;
      const ready = new Promise<void>((resolve) => (watching = resolve));
      const attack = sb.exec({
        command: ['perl', '-e', attacker],
        signal: abort.signal,
        onStdout: () => watching(),
      });
      onTestFinished(async () => {
        abort.abort();
        await attack.catch(() => undefined);
      });
      await ready;
      // The victim's window between fork and exec, widened so the attacker's poll finds it there on a busy
      // machine: af-init searches the command's own PATH, and 12,000 missing directories come first.
      const path = [...Array.from({ length: 12_000 }, (_, i) => `/n/${i}`), '/usr/bin', '/bin'].join(':');
      const outcomes: string[] = [];
      for (let attempt = 0; attempt < 5; attempt++) {
        // A stop that lands after exec is an ordinary stopped command: the host's timeout ends it.
        const r = await sb.exec({ command: ['true'], env: { PATH: path }, timeoutMs: 3_000 });
        const said = r.stderr.toString();
        outcomes.push(r.timedOut ? 'stopped after exec' : r.exitCode === 0 ? 'not stopped' : said);
        if (/did not reach exec in time/.test(said)) {
          expect(r.exitCode).toBe(126);
          expect(r.timedOut).toBe(false);
          break;
        }
      }
      expect(outcomes.at(-1), outcomes.join(' | ')).toMatch(/did not reach exec in time/);
      abort.abort();
      await attack;
      // af-init carries on: the next command runs.
      expect((await sb.exec({ command: 'echo ok' })).stdout.toString()).toBe('ok\n');
    }, 120_000);

    it('the host accepted one connection: no launcher socket is left to connect to, inside or on the host', async () => {
      for (const round of [0, 1]) {
        if (round === 1) await runtime.pool.settled(); // the second start is served from the pool
        const { sb, container } = await start();
        // The directory is not listable (0710): look for the socket by name.
        const inside = await sb.exec({
          command: '[ -e /.agentfense/sock ] && echo SOCKET; [ -x /.agentfense/af-init ] && echo init-there',
        });
        expect(inside.stdout.toString()).toBe('init-there\n');
        const dir = (await inspect(container)).Mounts.find((m) => m.Destination === '/.agentfense')?.Source;
        expect(dir).toBeDefined();
        expect(await readdir(dir ?? '')).toEqual(['af-init']);
        const err = await new Promise<NodeJS.ErrnoException>((resolve) => {
          const s = createConnection(`${dir ?? ''}/sock`);
          s.on('connect', () => {
            s.destroy();
            resolve(Object.assign(new Error('connected'), { code: 'CONNECTED' }));
          });
          s.on('error', resolve);
        });
        expect(err.code).toBe('ENOENT');
        // Only root and the sandbox's group may even look into the directory.
        expect((await stat(dir ?? '')).mode & 0o777).toBe(0o710);
      }
    });

    it('cannot kill af-init from inside: it is the pid namespace init, and commands keep running through it', async () => {
      const { sb } = await start();
      const r = await sb.exec({ command: 'kill -KILL 1; kill -TERM 1; kill -INT 1; sleep 0.2; echo still' });
      expect(r.stdout.toString()).toBe('still\n');
      const after = await sb.exec({ command: 'grep PPid /proc/$$/status' });
      expect(after.stdout.toString()).toMatch(/^PPid:\s+1$/m);
    });

    it('cannot ptrace af-init or read its descriptors, memory or environment', async () => {
      const { sb } = await start();
      const r = await sb.exec({
        command: [
          'ls /proc/1/fd >/dev/null 2>&1 && echo FDS',
          'cat /proc/1/environ >/dev/null 2>&1 && echo ENVIRON',
          'head -c1 /proc/1/mem >/dev/null 2>&1 && echo MEM',
          'ls -l /proc/1/exe >/dev/null 2>&1 && readlink /proc/1/exe >/dev/null 2>&1 && echo EXE',
          'echo done',
        ].join('; '),
      });
      expect(r.stdout.toString()).toBe('done\n');
    });

    it("af-init's argv and environment name no host path", async () => {
      const { container, stateDir } = await start();
      const pid = (await inspect(container)).State.Pid;
      const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean);
      expect(cmdline).toEqual(['/.agentfense/af-init', '--connect', '/.agentfense/sock']);
      const environ = await readFile(`/proc/${pid}/environ`, 'utf8');
      expect(environ).not.toContain(stateDir);
      expect(environ).not.toContain(process.cwd());
    });

    it('a dead af-init gives a clear error, never a hang', async () => {
      const { sb, container } = await start();
      // Commands go through af-init (its child), until it dies.
      expect((await sb.exec({ command: 'grep PPid /proc/$$/status' })).stdout.toString()).toMatch(
        /^PPid:\s+1$/m,
      );
      const running = sb.exec({ command: 'sleep 30', timeoutMs: 60_000 });
      await new Promise((resolve) => setTimeout(resolve, 300));
      process.kill((await inspect(container)).State.Pid, 'SIGKILL'); // af-init crashes (the container ends)
      const started = Date.now();
      await expect(running).rejects.toMatchObject({ code: 'AF_UNAVAILABLE' });
      await expect(sb.exec({ command: 'true' })).rejects.toMatchObject({
        code: expect.stringMatching(/^AF_(WRONG_STATE|UNAVAILABLE)$/) as unknown,
      });
      expect(Date.now() - started).toBeLessThan(20_000);
    });
  },
);
