// `cat /proc/self/uid_map` inside once showed the sandbox user was host uid 0 (bwrap was started as root
// and mapped the sandbox's uid 1000 to root). Now bwrap runs as an unprivileged host uid of the sandbox's
// own (leased host-wide; `agentfense-sandbox`, made by scripts/setup, is the runtime's default when none
// is given): every process of a sandbox — commands and session shells — has that host uid and no
// capabilities, seen from the host; the workspace still shows the sandbox user as owner and writes in the
// write areas work (allow_other, owner reporting).
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { createBwrapRuntime, resolveSandboxUser } from '@agentfense/runtime-bwrap';
import { useSandbox } from '../helpers/security-control.js';
import { waitForHostProcesses } from '../helpers/host-processes.js';

describe('sandbox processes never run as host root', () => {
  const sandbox = useSandbox();
  const user = resolveSandboxUser(undefined);

  it('commands and session shells run as the unprivileged sandbox user, without capabilities', async () => {
    expect(user).not.toBeNull();
    const { cp, id } = sandbox();
    const marker = `af-uid-marker-${process.pid}`;
    const running = cp.run(id, `sleep 30 # ${marker}`, { timeoutMs: 20_000 });
    const seen = await waitForHostProcesses(marker);
    const session = await cp.createSession(id);
    try {
      await session.run(`sh -c 'sleep 30 # ${marker}-session' &`);
      seen.push(...(await waitForHostProcesses(`${marker}-session`)));
    } finally {
      await cp.closeSession(session.id);
    }
    await cp.stopSandbox(id);
    await running.catch(() => undefined);
    // the command (bwrap monitor, pid 1, sh) and the session shell's child
    expect(seen.filter((p) => p.pid > 0).length).toBeGreaterThanOrEqual(2);
    // The sandbox's own uid (leased for it alone, recorded in its directory): not root, not the shared
    // system user, no host account's.
    const [uid, gid] = (await readFile(cp.layout.sandbox(id).hostUser, 'utf8')).trim().split(':');
    expect(uid).toBe(gid);
    expect(Number(uid)).toBeGreaterThan(2_000_000_000);
    expect(Number(uid)).not.toBe(user?.uid);
    const passwd = await readFile('/etc/passwd', 'utf8');
    expect(passwd.split('\n').some((line) => line.split(':')[2] === uid)).toBe(false);
    for (const p of seen) {
      // real, effective, saved and filesystem uid: all the sandbox's own, none root
      expect(p.uid.split(/\s+/)).toEqual(Array(4).fill(uid));
      expect(p.capEff).toBe('0000000000000000');
    }
    await cp.startSandbox(id);
  });

  it('shows the sandbox user as owner and allows writes in the write areas', async () => {
    const r = await sandbox().run(
      'id -u; stat -c %u:%g /workspace/README.md; echo made > /workspace/output/new.txt && cat /workspace/output/new.txt; echo x > /workspace/README.md 2>/dev/null || echo refused',
    );
    expect(r.out).toBe('1000\n1000:1000\nmade\nrefused\n');
  });

  it('the runtime reports the shared sandbox user as the default owner, and takes a user per sandbox', () => {
    const runtime = createBwrapRuntime();
    expect(runtime.traits.hostOwner).toEqual({ uid: user?.uid, gid: user?.gid });
    expect(runtime.traits.needsAllowOther).toBe(true);
    expect(runtime.traits.perSandboxUser).toBe(true);
  });
});
