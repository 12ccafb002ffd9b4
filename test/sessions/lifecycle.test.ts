// How sessions end (contract §5): `exit`, the shell dying, close(), `await using`, the idle timeout and the
// sandbox stopping; after each, no process of the session is left on the host. Plus the registry.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { SessionManager, createSession } from '@agentfense/control';
import { InvalidArgumentError, NotFoundError, UnavailableError, WrongStateError } from '@agentfense/protocol';
import type { RuntimeInstance } from '@agentfense/protocol';
import { expectNoProcessWith, hostProcessesWith } from '../runtime/contract.js';
import { newMarker, openSession, startSandbox } from '../helpers/session-fixture.js';

/** Resolves once some host process carries `marker` (the session's commands have started). */
async function waitForProcessWith(marker: string, count = 1): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((await hostProcessesWith(marker)).length < count) {
    if (Date.now() > deadline) throw new Error(`no process with ${marker} appeared`);
    await sleep(20);
  }
}

describe('exit and the shell dying', () => {
  it.each(['/bin/sh', '/bin/bash'] as const)(
    '`exit 3` in %s resolves with status 3 and closes the session',
    async (shell) => {
      const marker = newMarker('exit');
      const s = await openSession({ shell, env: { AF_MARKER: marker } });
      await s.run('sleep 1000 &');
      const exiting = s.run('echo bye; exit 3');
      const queued = s.run('echo queued');
      const r = await exiting;
      expect(r).toMatchObject({ exitCode: 3, timedOut: false, sessionClosed: true });
      expect(r.stdout).toBe('bye\n');
      expect(s.status).toBe('closed');
      expect(s.closedReason).toBe('exited');
      await expect(queued).rejects.toThrow(WrongStateError);
      await expect(s.run('true')).rejects.toThrow(new RegExp(`session ${s.id} is closed \\(exited\\)`));
      // The background job died with the shell.
      await expectNoProcessWith(marker);
    },
  );

  it('a shell killed by a signal ends the command with 128+n', async () => {
    const s = await openSession();
    const r = await s.run('kill -9 $$');
    expect(r).toMatchObject({ exitCode: 137, sessionClosed: true });
    expect(s.closedReason).toBe('exited');
  });

  it('a shell that exits between commands closes the session', async () => {
    const s = await openSession();
    await s.run('(sleep 0.2; kill -9 $$) &');
    const deadline = Date.now() + 10_000;
    while (s.status === 'open' && Date.now() < deadline) await sleep(20);
    expect(s.closedReason).toBe('exited');
    await expect(s.run('true')).rejects.toThrow(WrongStateError);
  });
});

describe('close', () => {
  it('kills every process of the session; running and queued commands reject', async () => {
    const marker = newMarker('close');
    const s = await openSession({ env: { AF_MARKER: marker } });
    await s.run('sleep 1000 & sh -c "sleep 1000 &"');
    const running = s.run('sleep 1000');
    const queued = s.run('echo never');
    await waitForProcessWith(marker, 4);
    await s.close();
    await s.close();
    await expect(running).rejects.toThrow(/was closed \(closed\) while a command was running/);
    await expect(queued).rejects.toThrow(WrongStateError);
    expect(s.status).toBe('closed');
    expect(s.closedReason).toBe('closed');
    await expectNoProcessWith(marker);
  });

  it('await using closes at the end of the scope', async () => {
    const marker = newMarker('dispose');
    const { sb } = await startSandbox();
    {
      await using s = await createSession(sb, { env: { AF_MARKER: marker } });
      await s.run('sleep 1000 &');
      await waitForProcessWith(marker, 2);
    }
    await expectNoProcessWith(marker);
  });

  it('the idle timeout closes a session that runs nothing; commands keep it alive', async () => {
    const marker = newMarker('idle');
    const s = await openSession({ env: { AF_MARKER: marker }, idleTimeoutMs: 600 });
    await s.run('sleep 1000 &');
    for (let i = 0; i < 4; i += 1) {
      await sleep(300);
      await s.run('true');
    }
    expect(s.status).toBe('open');
    // A command longer than the idle timeout does not count as idle.
    await s.run('sleep 0.8');
    expect(s.status).toBe('open');
    const deadline = Date.now() + 10_000;
    while (s.status === 'open' && Date.now() < deadline) await sleep(50);
    expect(s.closedReason).toBe('idle-timeout');
    await expectNoProcessWith(marker);
    await expect(s.run('true')).rejects.toThrow(/is closed \(idle-timeout\)/);
  });

  it('stopping the sandbox ends its sessions', async () => {
    const marker = newMarker('stop');
    const { sb } = await startSandbox();
    const s = await openSession({ sandbox: sb, env: { AF_MARKER: marker } });
    await s.run('sleep 1000 &');
    await sb.stop();
    await expectNoProcessWith(marker);
    await expect(s.run('true')).rejects.toThrow(WrongStateError);
  });
});

describe('createSession', () => {
  it('rejects a shell outside the list before starting anything', async () => {
    const { sb } = await startSandbox();
    await expect(createSession(sb, { shell: '/bin/zsh' as never })).rejects.toThrow(InvalidArgumentError);
  });

  it('names the missing shell when the sandbox lacks it', async () => {
    const { sb } = await startSandbox();
    // The same sandbox, except that its /bin/bash does not exist.
    const missing: RuntimeInstance = {
      sandboxId: sb.sandboxId,
      limits: sb.limits,
      exec: (options) => sb.exec(options),
      stop: () => sb.stop(),
      spawn: (options) =>
        sb.spawn({
          ...options,
          argv: options.argv.map((a) => (a === '/bin/bash' ? '/bin/no-such-shell' : a)),
        }),
    };
    await expect(createSession(missing, { shell: '/bin/bash' })).rejects.toThrow(UnavailableError);
    await expect(createSession(missing, { shell: '/bin/bash' })).rejects.toThrow(
      /\/bin\/bash is not available/,
    );
  });

  it('refuses to start in a stopped sandbox', async () => {
    const { sb } = await startSandbox();
    await sb.stop();
    await expect(createSession(sb)).rejects.toThrow(WrongStateError);
  });
});

describe('SessionManager', () => {
  it('creates, gets, lists and closes sessions; closed ones leave the registry', async () => {
    const manager = new SessionManager();
    const { sb } = await startSandbox();
    const a = await manager.create(sb);
    const b = await manager.create(sb, { shell: '/bin/bash' });
    expect(a.id).toMatch(/^ses_[0-9a-f-]{36}$/);
    expect(manager.get(a.id)).toBe(a);
    expect(
      manager
        .list()
        .map((s) => s.id)
        .sort(),
    ).toEqual([a.id, b.id].sort());
    expect(a.info()).toMatchObject({ id: a.id, sandboxId: sb.sandboxId, shell: '/bin/sh', status: 'open' });
    await manager.close(a.id);
    expect(() => manager.get(a.id)).toThrow(NotFoundError);
    await b.run('exit');
    expect(manager.list()).toEqual([]);
    expect(() => manager.get('ses_../../etc/passwd')).toThrow(InvalidArgumentError);
    await manager.closeAll();
  });

  it('closeSandbox closes only that sandbox’s sessions, and their processes', async () => {
    const manager = new SessionManager({ idleTimeoutMs: 60_000 });
    const marker = newMarker('sandbox');
    const { sb: first } = await startSandbox();
    const { sb: second } = await startSandbox();
    const doomed = [
      await manager.create(first, { env: { AF_MARKER: marker } }),
      await manager.create(first, { env: { AF_MARKER: marker } }),
    ];
    const kept = await manager.create(second);
    for (const s of doomed) await s.run('sleep 1000 &');
    await manager.closeSandbox(first.sandboxId);
    expect(doomed.map((s) => s.closedReason)).toEqual(['sandbox-stopped', 'sandbox-stopped']);
    expect(manager.list()).toEqual([kept]);
    expect(manager.list({ sandboxId: first.sandboxId })).toEqual([]);
    await expectNoProcessWith(marker);
    expect((await kept.run('echo ok')).stdout).toBe('ok\n');
    await manager.closeAll();
    expect(kept.status).toBe('closed');
  });

  it('uses a caller-given id and passes onClose through', async () => {
    const manager = new SessionManager();
    const { sb } = await startSandbox();
    const closed: string[] = [];
    const id = 'ses_00000000-0000-4000-8000-000000000000';
    const s = await manager.create(sb, { id, onClose: (session) => closed.push(session.id) });
    expect(s.id).toBe(id);
    await s.close();
    expect(closed).toEqual([id]);
  });
});
