// Timeouts against real bwrap: the command is interrupted, its processes are gone, and the session keeps
// its state for the next command. Escalation for commands that ignore SIGINT, and the last resort.
import { describe, expect, it } from 'vitest';
import { SESSION_SHELLS } from '@agentfense/control';
import { WrongStateError } from '@agentfense/protocol';
import type { RuntimeInstance } from '@agentfense/protocol';
import { expectNoProcessWith, hostProcessesWith } from '../runtime/contract.js';
import { newMarker, openSession, startSandbox } from '../helpers/session-fixture.js';

/** A process that carries `marker` in its argv (sh does not exec a non-final sleep). */
const sleeper = (marker: string): string => `sh -c 'sleep 1000; : ${marker}'`;

describe.each(SESSION_SHELLS)('timeouts with %s', (shell) => {
  it('interrupts a running program; state set before survives', async () => {
    const marker = newMarker('timeout');
    const s = await openSession({ shell });
    await s.run('cd /tmp && KEPT=yes && export EXPORTED=too');
    const r = await s.run(`echo partial; echo warn >&2; ${sleeper(marker)}; echo never`, { timeoutMs: 500 });
    expect(r).toMatchObject({ timedOut: true, exitCode: null, sessionClosed: false });
    expect(r.durationMs).toBeGreaterThanOrEqual(500);
    expect(r.durationMs).toBeLessThan(5_000);
    expect(r.stdout).toBe('partial\n');
    expect(r.stderr).toMatch(/^warn\n/);
    await expectNoProcessWith(marker);
    const after = await s.run('pwd; echo $KEPT $EXPORTED');
    expect(after).toMatchObject({ stdout: '/tmp\nyes too\n', exitCode: 0, timedOut: false });
  });

  it('interrupts a builtin loop running in the shell itself', async () => {
    const s = await openSession({ shell });
    await s.run('N=1');
    const r = await s.run('while :; do :; done', { timeoutMs: 300 });
    expect(r.timedOut).toBe(true);
    expect((await s.run('echo $N')).stdout).toBe('1\n');
  });

  it('kills a command that ignores SIGINT, and every process it started', async () => {
    const marker = newMarker('ignores_int');
    const s = await openSession({ shell });
    await s.run('V=kept');
    const r = await s.run(`sh -c "trap '' INT; ${sleeper(marker)} & ${sleeper(marker)}"`, {
      timeoutMs: 300,
    });
    expect(r.timedOut).toBe(true);
    await expectNoProcessWith(marker);
    expect((await s.run('echo $V')).stdout).toBe('kept\n');
  });

  it('leaves background jobs of earlier commands running when SIGINT suffices', async () => {
    const marker = newMarker('bg');
    const s = await openSession({ shell, env: { AF_MARKER: marker } });
    await s.run(`${sleeper(marker)} &`);
    await s.run('sleep 100', { timeoutMs: 300 });
    expect((await s.run('kill -0 $! && echo alive')).stdout).toBe('alive\n');
  });

  it('a command that finishes within its timeout is not affected', async () => {
    const s = await openSession({ shell });
    const r = await s.run('sleep 0.1; echo done', { timeoutMs: 5_000 });
    expect(r).toMatchObject({ stdout: 'done\n', exitCode: 0, timedOut: false });
  });

  it('back-to-back timeouts keep the session in step', async () => {
    const s = await openSession({ shell });
    for (let i = 0; i < 5; i += 1) {
      const r = await s.run(`echo run${i}; sleep 100`, { timeoutMs: 100 + i * 37 });
      expect(r.timedOut).toBe(true);
      expect(r.stdout).toMatch(new RegExp(`^(run${i}\\n)?$`));
      expect((await s.run(`echo check${i}`)).stdout).toBe(`check${i}\n`);
    }
  });

  it('closes the session when the shell itself cannot be interrupted', async () => {
    const marker = newMarker('stuck');
    const s = await openSession({ shell, env: { AF_MARKER: marker } });
    await s.run("trap '' INT");
    const r = await s.run('while :; do :; done', { timeoutMs: 200 });
    expect(r).toMatchObject({ timedOut: true, exitCode: null, sessionClosed: true });
    expect(s.status).toBe('closed');
    expect(s.closedReason).toBe('timeout');
    await expect(s.run('true')).rejects.toThrow(WrongStateError);
    await expectNoProcessWith(marker);
    expect(await hostProcessesWith(marker)).toEqual([]);
  });

  it('interrupts even when the runtime starts the session with SIGINT ignored (as Docker’s wrapper does)', async () => {
    const { sb } = await startSandbox();
    // The same sandbox, except that every spawned process starts with SIGINT ignored.
    const ignoring: RuntimeInstance = {
      sandboxId: sb.sandboxId,
      limits: sb.limits,
      exec: (options) => sb.exec(options),
      stop: () => sb.stop(),
      spawn: (options) =>
        sb.spawn({ ...options, argv: ['/bin/sh', '-c', 'trap "" INT; exec "$@"', 'sh', ...options.argv] }),
    };
    const s = await openSession({ shell, sandbox: ignoring });
    const r = await s.run('while :; do :; done', { timeoutMs: 300 });
    expect(r).toMatchObject({ timedOut: true, sessionClosed: false });
    expect((await s.run('echo ok')).stdout).toBe('ok\n');
  });
});
