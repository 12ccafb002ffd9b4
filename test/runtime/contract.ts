// The runtime contract as tests: every promise of packages/protocol/src/runtime.ts that a caller can observe.
// Each runtime's test file calls runRuntimeContract() with a factory; nothing here knows about bwrap or Docker.
//
// Conventions the suite relies on:
// - Every sandbox a test starts is stopped in onTestFinished, and no process carrying the test's unique
//   marker may survive a timeout, an abort or stop() (checked in the host's /proc, with a short deadline
//   for the kernel to reap killed processes).
// - A limit is tested only when the runtime reports it enforced; otherwise the test is skipped visibly
//   (ctx.skip) so the report shows what this host does not enforce.
// - A command killed by a signal inside the sandbox may be reported either as `signal` or, when the
//   runtime's wrapper converts it (bwrap's init, docker), as the shell's `128 + n` exit status.
import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { ExecResult, RuntimeInstance, RuntimeStartOptions, SandboxRuntime } from '@agentfense/protocol';
import { InvalidArgumentError, WrongStateError } from '@agentfense/protocol';

/** Host directories for one sandbox: created per sandbox, removed by `cleanup`. */
export interface WorkspaceFixture {
  readonly workspaceHostPath: string;
  readonly stateDir: string;
  cleanup(): Promise<void>;
}

/** Runtime options the contract tests set (every runtime's factory accepts them). */
export interface ContractRuntimeOptions {
  readonly maxOutputBytes?: number;
}

export interface RuntimeContractOptions {
  /** Shown in the describe block and expected in `audit.runtime`. */
  readonly name: 'bwrap' | 'docker';
  /** The runtime under test; `options` are runtime options a test needs set (both runtimes take them). */
  readonly makeRuntime: (options?: ContractRuntimeOptions) => SandboxRuntime | Promise<SandboxRuntime>;
  /** A fresh workspace + state directory per sandbox. */
  readonly workspace: () => Promise<WorkspaceFixture>;
  /** Host resources of a sandbox that must be gone after stop() (e.g. cgroup directories); [] if none. */
  readonly leftovers?: (sandboxId: string) => Promise<string[]>;
}

/** How long the kernel gets to reap killed processes before the suite calls them leaked. */
const REAP_DEADLINE_MS = 3_000;

/** Host pids (other than ours) whose command line or environment contains `marker`. */
/**
 * Host pids of a sandbox's own processes carrying `marker` (`sh` and `sleep`), not the `agentfense run` CLI
 * whose argv names it too.
 */
export async function sandboxProcessesWith(marker: string): Promise<number[]> {
  const pids = await hostProcessesWith(marker);
  const comms = await Promise.all(
    pids.map((pid) => readFile(`/proc/${String(pid)}/comm`, 'utf8').catch(() => '')),
  );
  return pids.filter((_, i) => ['sh', 'sleep'].includes((comms[i] ?? '').trim()));
}

export async function hostProcessesWith(marker: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    for (const file of ['cmdline', 'environ']) {
      const text = await readFile(`/proc/${entry}/${file}`, 'utf8').catch((err: unknown) => {
        // The process exited between readdir and read: it is not a survivor. A non-dumpable host process
        // (the VM's init here) refuses its environ even to root; sandbox processes never do, because
        // they are children of our own user namespace.
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ESRCH' || (code === 'EACCES' && file === 'environ')) return '';
        throw err;
      });
      if (text.includes(marker)) {
        found.push(Number(entry));
        break;
      }
    }
  }
  return found;
}

/** Resolves once no host process carries `marker`; fails with the survivors after REAP_DEADLINE_MS. */
export async function expectNoProcessWith(marker: string): Promise<void> {
  const deadline = Date.now() + REAP_DEADLINE_MS;
  let left = await hostProcessesWith(marker);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(20);
    left = await hostProcessesWith(marker);
  }
  expect(left, `processes with marker ${marker} survived`).toEqual([]);
}

/** A command killed by `name` inside the sandbox: as a signal, or as the shell's 128+n status. */
export function expectKilledBy(result: ExecResult, name: NodeJS.Signals): void {
  const number = constants.signals[name];
  expect(
    result.signal === name || result.exitCode === 128 + number,
    `killed by ${name}: ${JSON.stringify({ exitCode: result.exitCode, signal: result.signal })}`,
  ).toBe(true);
}

/** A shell snippet that leaves a process carrying `marker` in its argv (sh does not exec a non-final sleep). */
function markedSleeper(marker: string): string {
  return `sh -c 'sleep 1000; : ${marker}'`;
}

/** Registers the contract tests for one runtime. */
export function runRuntimeContract(options: RuntimeContractOptions): void {
  describe(`runtime contract: ${options.name}`, () => {
    /** Starts a sandbox for this test; stopped (and its dirs removed) when the test finishes. */
    async function startSandbox(
      extra: Partial<RuntimeStartOptions> = {},
      runtimeOptions?: ContractRuntimeOptions,
    ): Promise<{ sb: RuntimeInstance; fixture: WorkspaceFixture }> {
      const runtime = await options.makeRuntime(runtimeOptions);
      const fixture = await options.workspace();
      const sandboxId = `sb_${randomUUID()}`;
      const sb = await runtime.start({
        sandboxId,
        workspaceHostPath: fixture.workspaceHostPath,
        stateDir: fixture.stateDir,
        ...extra,
      });
      onTestFinished(async () => {
        await sb.stop();
        if (options.leftovers !== undefined) expect(await options.leftovers(sandboxId)).toEqual([]);
        await fixture.cleanup();
      });
      return { sb, fixture };
    }

    it('check() passes on this host', async () => {
      const runtime = await options.makeRuntime();
      await expect(runtime.check()).resolves.toBeUndefined();
    });

    describe('output', () => {
      it('returns stdout and stderr bytes exactly, without adding or stripping a trailing newline', async () => {
        const { sb } = await startSandbox();
        const r = await sb.exec({ command: "printf 'a\\nb'; printf 'err\\n\\n' >&2" });
        expect(r.stdout).toEqual(Buffer.from('a\nb'));
        expect(r.stderr).toEqual(Buffer.from('err\n\n'));
        expect(r.exitCode).toBe(0);
        expect(r.signal).toBeNull();
        expect(r.timedOut).toBe(false);
        expect(r.cancelled).toBe(false);
        expect(r.oomKilled).toBe(false);
        expect(r.durationMs).toBeGreaterThan(0);
      });

      it('returns binary output byte for byte', async () => {
        const { sb } = await startSandbox();
        const r = await sb.exec({ command: "printf '\\000\\001\\377\\376\\200'" });
        expect([...r.stdout]).toEqual([0, 1, 255, 254, 128]);
      });

      it('returns large output completely', async () => {
        const { sb } = await startSandbox();
        const r = await sb.exec({ command: 'head -c 3000000 /dev/zero | tr "\\0" x' });
        expect(r.stdout.length).toBe(3_000_000);
        expect(r.stdout.every((b) => b === 0x78)).toBe(true);
      });

      it('keeps output that exactly fills maxOutputBytes, and cuts and stops a command printing past it', async () => {
        const { sb } = await startSandbox({}, { maxOutputBytes: 4096 });
        const exact = await sb.exec({ command: 'head -c 4096 /dev/zero | tr "\\0" x' });
        expect(exact.stdout.length).toBe(4096);
        expect(exact.exitCode).toBe(0);
        const endless = await sb.exec({ command: 'yes', timeoutMs: 60_000 });
        expect(endless.stdout.length).toBe(4096);
        expect(endless.stdout.toString()).toBe('y\n'.repeat(2048));
        expect(endless.exitCode).not.toBe(0);
        expect(endless.timedOut).toBe(false);
      });
    });

    describe('exit status', () => {
      it.each([
        ['true', 0],
        ['false', 1],
        ['exit 42', 42],
        ['no-such-command-af', 127],
      ])('%s exits %i', async (command, code) => {
        const { sb } = await startSandbox();
        const r = await sb.exec({ command });
        expect(r.exitCode).toBe(code);
        expect(r.signal).toBeNull();
      });

      it('runs an argv array without a shell', async () => {
        const { sb } = await startSandbox();
        const r = await sb.exec({ command: ['printf', '%s|', '$HOME', 'a b', '*'] });
        expect(r.stdout.toString()).toBe('$HOME|a b|*|');
        const missing = await sb.exec({ command: ['no-such-command-af'] });
        expect(missing.exitCode).not.toBe(0);
      });

      it.each([
        ['SIGTERM', 'kill -TERM $$'],
        ['SIGKILL', 'kill -KILL $$'],
      ] as const)('reports a command killed by %s', async (name, command) => {
        const { sb } = await startSandbox();
        expectKilledBy(await sb.exec({ command }), name);
      });
    });

    describe('stdin', () => {
      it('feeds string and byte stdin, then closes it', async () => {
        const { sb } = await startSandbox();
        expect((await sb.exec({ command: 'cat', stdin: 'hello\nworld' })).stdout.toString()).toBe(
          'hello\nworld',
        );
        const bytes = new Uint8Array([0, 255, 10, 13, 1]);
        expect([...(await sb.exec({ command: ['cat'], stdin: bytes })).stdout]).toEqual([...bytes]);
      });

      it('gives an empty stdin when none is passed (cat does not hang)', async () => {
        const { sb } = await startSandbox();
        const r = await sb.exec({ command: 'cat; echo done', timeoutMs: 10_000 });
        expect(r.timedOut).toBe(false);
        expect(r.stdout.toString()).toBe('done\n');
      });
    });

    describe('environment', () => {
      it('sets PATH, HOME, LANG, TERM, then the sandbox env, then the exec env (which wins)', async () => {
        const { sb } = await startSandbox({ env: { SB_ONLY: 'sandbox', BOTH: 'sandbox' } });
        const r = await sb.exec({
          command:
            'printf "%s|" "$SB_ONLY" "$BOTH" "$EXEC_ONLY"; for v in PATH HOME LANG TERM; do eval "test -n \\"\\$$v\\"" || echo "missing $v"; done',
          env: { BOTH: 'exec', EXEC_ONLY: 'x y' },
        });
        expect(r.stdout.toString()).toBe('sandbox|exec|x y|');
      });

      it("does not leak the control plane's environment", async () => {
        const marker = `af_leak_${randomUUID()}`;
        process.env['AF_CONTRACT_LEAK'] = marker;
        onTestFinished(() => {
          delete process.env['AF_CONTRACT_LEAK'];
        });
        const { sb } = await startSandbox();
        const r = await sb.exec({
          command: 'env; cat /proc/1/environ /proc/self/environ 2>/dev/null | tr "\\0" "\\n"',
        });
        expect(r.stdout.toString()).not.toContain(marker);
        expect(r.stdout.toString()).not.toContain('AF_CONTRACT_LEAK');
      });

      it('rejects invalid variable names', async () => {
        const { sb } = await startSandbox();
        await expect(sb.exec({ command: 'true', env: { 'A-B': '1' } })).rejects.toThrow(InvalidArgumentError);
      });
    });

    describe('working directory', () => {
      it('defaults to /workspace, where the workspace is visible and writable', async () => {
        const { sb, fixture } = await startSandbox();
        const r = await sb.exec({ command: 'pwd; echo written > from-sandbox.txt' });
        expect(r.stdout.toString()).toBe('/workspace\n');
        expect(await readFile(`${fixture.workspaceHostPath}/from-sandbox.txt`, 'utf8')).toBe('written\n');
      });

      it('runs in the given cwd and refuses relative or unnormalised ones', async () => {
        const { sb } = await startSandbox();
        expect((await sb.exec({ command: 'pwd', cwd: '/tmp' })).stdout.toString()).toBe('/tmp\n');
        await expect(sb.exec({ command: 'pwd', cwd: 'tmp' })).rejects.toThrow(InvalidArgumentError);
        await expect(sb.exec({ command: 'pwd', cwd: '/workspace/../etc' })).rejects.toThrow(
          InvalidArgumentError,
        );
      });
    });

    describe('timeout and cancellation', () => {
      it('kills the whole tree on timeout, background jobs included', async () => {
        const marker = `af_timeout_${randomUUID()}`;
        const { sb } = await startSandbox();
        const started = Date.now();
        // Proof the tree existed: look for it on the host as soon as the command says it has started.
        let during: Promise<number[]> = Promise.resolve([]);
        const r = await sb.exec({
          command: `${markedSleeper(marker)} & ${markedSleeper(marker)} & echo started; wait`,
          timeoutMs: 1_500,
          onStdout: () => {
            during = hostProcessesWith(marker);
          },
        });
        expect((await during).length).toBeGreaterThanOrEqual(2);
        expect(r.timedOut).toBe(true);
        expect(r.cancelled).toBe(false);
        expect(r.exitCode === 0).toBe(false);
        expect(r.stdout.toString()).toBe('started\n');
        expect(Date.now() - started).toBeLessThan(10_000);
        await expectNoProcessWith(marker);
      });

      it('kills background jobs left behind when the command itself exits', async () => {
        const marker = `af_orphan_${randomUUID()}`;
        const { sb } = await startSandbox();
        const r = await sb.exec({ command: `${markedSleeper(marker)} >/dev/null 2>&1 & echo bye` });
        expect(r.exitCode).toBe(0);
        await expectNoProcessWith(marker);
      });

      it('kills the tree when the abort signal fires', async () => {
        const marker = `af_abort_${randomUUID()}`;
        const { sb } = await startSandbox();
        const controller = new AbortController();
        setTimeout(() => controller.abort(), 300);
        const r = await sb.exec({
          command: `${markedSleeper(marker)} & ${markedSleeper(marker)}`,
          signal: controller.signal,
        });
        expect(r.cancelled).toBe(true);
        expect(r.timedOut).toBe(false);
        await expectNoProcessWith(marker);
      });
    });

    describe('streaming', () => {
      it('delivers chunks as they come, in order, and the result still holds everything', async () => {
        const { sb } = await startSandbox();
        const events: { stream: 'out' | 'err'; text: string; at: number }[] = [];
        const started = Date.now();
        const r = await sb.exec({
          command: 'printf one; sleep 0.4; printf two >&2; sleep 0.4; printf three',
          onStdout: (chunk) =>
            events.push({ stream: 'out', text: chunk.toString(), at: Date.now() - started }),
          onStderr: (chunk) =>
            events.push({ stream: 'err', text: chunk.toString(), at: Date.now() - started }),
        });
        const finished = Date.now() - started;
        expect(events.map((e) => `${e.stream}:${e.text}`)).toEqual(['out:one', 'err:two', 'out:three']);
        // "one" arrived while the command was still running, not at the end.
        expect(events[0]?.at ?? Infinity).toBeLessThan(finished - 500);
        expect(r.stdout.toString()).toBe('onethree');
        expect(r.stderr.toString()).toBe('two');
      });
    });

    describe('network', () => {
      /** A TCP server on the host's 127.0.0.1 that records connections. */
      async function listen(): Promise<{ port: number; connections: () => number }> {
        let count = 0;
        const sockets = new Set<Socket>();
        const server: Server = createServer((socket) => {
          count += 1;
          sockets.add(socket);
          socket.on('close', () => sockets.delete(socket));
          socket.end();
        });
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        onTestFinished(async () => {
          for (const socket of sockets) socket.destroy();
          await new Promise<void>((resolve, reject) =>
            server.close((err) => (err ? reject(err) : resolve())),
          );
        });
        return { port: (server.address() as AddressInfo).port, connections: () => count };
      }

      it('is off by default: only a loopback device, and the host loopback is unreachable', async () => {
        const { port, connections } = await listen();
        const { sb } = await startSandbox();
        const devices = await sb.exec({ command: "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '" });
        expect(devices.stdout.toString().trim().split('\n')).toEqual(['lo']);
        const r = await sb.exec({
          command: `bash -c 'echo hi > /dev/tcp/127.0.0.1/${port}'`,
          timeoutMs: 10_000,
        });
        expect(r.exitCode).not.toBe(0);
        expect(connections()).toBe(0);
      });

      it("runs every process in the network namespace it is given (a network policy's), never the host's", async () => {
        // 'joins': the host made the namespace at the path first; 'publishes': the runtime binds its own there.
        const dir = await mkdtemp(join(tmpdir(), 'af-netns-'));
        const file = join(dir, 'netns');
        onTestFinished(async () => {
          await execa('umount', ['-l', file], { reject: false });
          await rm(dir, { recursive: true, force: true });
        });
        const runtime = await options.makeRuntime();
        if (runtime.traits.netns === 'joins') {
          await writeFile(file, '');
          await execa('unshare', [`--net=${file}`, 'true']);
        }
        const { sb } = await startSandbox({ netns: file });
        const inside = await sb.exec({ command: 'readlink /proc/self/ns/net' });
        const { ino } = await stat(file);
        expect(inside.stdout.toString().trim()).toBe(`net:[${ino}]`);
        expect(inside.stdout.toString().trim()).not.toBe(await readlink('/proc/self/ns/net'));
      });
    });

    describe('resource limits', () => {
      it('OOM-kills a 200 MB allocation under a 64 MiB memory limit', async (ctx) => {
        const { sb } = await startSandbox({ resources: { memoryBytes: 64 * 1024 * 1024 } });
        if (sb.limits.memoryBytes === null)
          ctx.skip(`${options.name} does not enforce memory limits on this host`);
        expect(sb.limits.memoryBytes).toBe(64 * 1024 * 1024);
        // tail buffers /dev/zero looking for a newline: it allocates all 200 MB.
        const r = await sb.exec({
          command: 'head -c 200000000 /dev/zero | tail > /dev/null',
          timeoutMs: 30_000,
        });
        expect(r.timedOut).toBe(false);
        expect(r.oomKilled).toBe(true);
        expectKilledBy(r, 'SIGKILL');
        // The sandbox stays usable and a small command is not reported as OOM-killed.
        const after = await sb.exec({ command: 'echo ok' });
        expect(after.stdout.toString()).toBe('ok\n');
        expect(after.oomKilled).toBe(false);
      });

      it('bounds a fork bomb with the pids limit', async (ctx) => {
        const { sb } = await startSandbox({ resources: { pidsLimit: 20 } });
        if (sb.limits.pidsLimit === null)
          ctx.skip(`${options.name} does not enforce pids limits on this host`);
        const marker = `af_pids_${randomUUID()}`;
        // Each `sleep &` holds one pid; the loop prints how many it managed to start, and the shell gives
        // up at the first failed fork. The marker rides in the environment every process inherits.
        const r = await sb.exec({
          command: 'i=0; while [ $i -lt 200 ]; do sleep 1000 & i=$((i+1)); echo $i; done',
          env: { AF_MARKER: marker },
          timeoutMs: 20_000,
        });
        const started = r.stdout.toString().trim().split('\n').length;
        expect(started).toBeLessThan(20);
        expect(r.stderr.toString()).toMatch(/fork|resource temporarily unavailable/i);
        await sb.stop();
        await expectNoProcessWith(marker);
      });

      it('reports the limits it enforces with a mechanism', async () => {
        const { sb } = await startSandbox({
          resources: { memoryBytes: 128 * 1024 * 1024, pidsLimit: 100, cpuQuota: 50_000, cpuShares: 512 },
        });
        expect(typeof sb.limits.mechanism).toBe('string');
        for (const [key, asked] of [
          ['memoryBytes', 128 * 1024 * 1024],
          ['pidsLimit', 100],
          ['cpuQuota', 50_000],
          ['cpuShares', 512],
        ] as const) {
          expect([asked, null]).toContain(sb.limits[key]);
        }
        const anyEnforced = [
          sb.limits.memoryBytes,
          sb.limits.pidsLimit,
          sb.limits.cpuQuota,
          sb.limits.cpuShares,
        ].some((v) => v !== null);
        expect(sb.limits.mechanism === 'none').toBe(!anyEnforced);
        const { sb: unlimited } = await startSandbox();
        expect(unlimited.limits).toMatchObject({
          memoryBytes: null,
          pidsLimit: null,
          cpuQuota: null,
          cpuShares: null,
        });
      });
    });

    describe('isolation', () => {
      it("cannot see the host's processes", async () => {
        const { sb } = await startSandbox();
        const hostInit = await readFile('/proc/1/cmdline', 'utf8');
        const r = await sb.exec({ command: 'cat /proc/1/cmdline; echo; ls /proc | grep -c "^[0-9]"' });
        const [init, count] = r.stdout.toString().split('\n');
        expect(init).not.toBe(hostInit);
        expect(Number(count)).toBeLessThan(10);
        const mine = await sb.exec({
          command: `test -e /proc/${process.pid}/environ && cat /proc/${process.pid}/environ`,
        });
        expect(mine.stdout.toString()).not.toContain('AF_CONTRACT');
      });

      it('runs as an unprivileged user without capabilities', async () => {
        const { sb } = await startSandbox();
        const r = await sb.exec({ command: 'id -u; grep CapEff /proc/self/status' });
        const [uid, caps] = r.stdout.toString().split('\n');
        expect(uid).not.toBe('0');
        expect(caps).toMatch(/^CapEff:\s+0+$/);
      });
    });

    describe('audit', () => {
      it('records the wrapped argv with host paths replaced by placeholders', async () => {
        const { sb, fixture } = await startSandbox({ env: { SECRET_TOKEN: 'hunter2' } });
        const r = await sb.exec({ command: 'true' });
        expect(r.audit.runtime).toBe(options.name);
        expect(r.audit.limits).toEqual(sb.limits);
        const joined = r.audit.argv.join(' ');
        expect(joined).toContain('<workspace>');
        expect(joined).not.toContain(fixture.workspaceHostPath);
        expect(joined).not.toContain(fixture.stateDir);
        expect(joined).not.toContain('hunter2');
      });
    });

    describe('spawn', () => {
      it('gives raw pipes to a long-lived process', async () => {
        const { sb } = await startSandbox();
        const proc = await sb.spawn({ argv: ['cat'] });
        const chunks: Buffer[] = [];
        proc.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
        proc.stdin.write('ping\n');
        proc.stdin.end('pong');
        expect(await proc.wait()).toEqual({ exitCode: 0, signal: null });
        expect(Buffer.concat(chunks).toString()).toBe('ping\npong');
        expect(proc.audit.runtime).toBe(options.name);
      });

      it('kill() ends the whole tree and is idempotent', async () => {
        const marker = `af_spawn_${randomUUID()}`;
        const { sb } = await startSandbox();
        const proc = await sb.spawn({
          argv: ['sh', '-c', `${markedSleeper(marker)} & ${markedSleeper(marker)}`],
        });
        expect(proc.pid).toBeGreaterThan(0);
        await proc.kill();
        await proc.kill();
        const exit = await proc.wait();
        expect(exit.exitCode === 0).toBe(false);
        await expectNoProcessWith(marker);
      });
    });

    describe('stop', () => {
      it('kills every process of the sandbox, is idempotent, and refuses new commands', async () => {
        const marker = `af_stop_${randomUUID()}`;
        const { sb } = await startSandbox({ resources: { memoryBytes: 256 * 1024 * 1024, pidsLimit: 200 } });
        const proc = await sb.spawn({
          argv: ['sh', '-c', `${markedSleeper(marker)} & ${markedSleeper(marker)}`],
        });
        const running = sb.exec({ command: `${markedSleeper(marker)} & ${markedSleeper(marker)}` });
        // Both have started once their markers show up on the host.
        const deadline = Date.now() + 10_000;
        while ((await hostProcessesWith(marker)).length < 4 && Date.now() < deadline) await sleep(20);
        expect((await hostProcessesWith(marker)).length).toBeGreaterThanOrEqual(4);
        await sb.stop();
        await sb.stop();
        const result = await running;
        expect(result.exitCode === 0).toBe(false);
        await proc.wait();
        await expectNoProcessWith(marker);
        await expect(sb.exec({ command: 'true' })).rejects.toThrow(WrongStateError);
        await expect(sb.spawn({ argv: ['true'] })).rejects.toThrow(WrongStateError);
      });
    });
  });
}
