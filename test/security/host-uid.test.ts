// Issue 12 row 1: `cat /proc/self/uid_map` inside showed the sandbox user was host uid 0 (bwrap was started
// as root and mapped the sandbox's uid 1000 to root). Now bwrap runs as the unprivileged system user
// `agentfense-sandbox` (scripts/setup creates it): every process of a sandbox — commands and session
// shells — has that host uid and no capabilities, seen from the host; the workspace still shows the
// sandbox user as owner and writes in the write areas work (allow_other, owner reporting).
import { readFile, readdir } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { createBwrapRuntime, resolveSandboxUser } from '@agentfense/runtime-bwrap';
import { useSandbox } from './helpers/control.js';

/** Host pids whose command line contains `marker`, with their Uid and CapEff lines from the host's view. */
async function hostProcesses(marker: string): Promise<{ pid: number; uid: string; capEff: string }[]> {
  const found: { pid: number; uid: string; capEff: string }[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (!cmdline.includes(marker) || cmdline.includes('vitest')) continue;
    const status = await readFile(`/proc/${entry}/status`, 'utf8').catch(() => '');
    const uid = /^Uid:\s+(.*)$/m.exec(status)?.[1] ?? '';
    const capEff = /^CapEff:\s+(\S+)$/m.exec(status)?.[1] ?? '';
    if (uid !== '') found.push({ pid: Number(entry), uid, capEff });
  }
  return found;
}

/** Waits until a process with `marker` in its command line shows up on the host. */
async function waitForHost(marker: string): Promise<{ pid: number; uid: string; capEff: string }[]> {
  for (let i = 0; i < 200; i++) {
    const seen = await hostProcesses(marker);
    if (seen.length > 0) return seen;
    await new Promise((r) => setTimeout(r, 50));
  }
  return [];
}

describe('sandbox processes never run as host root', () => {
  const sandbox = useSandbox();
  const user = resolveSandboxUser(undefined);

  it('commands and session shells run as the unprivileged sandbox user, without capabilities', async () => {
    expect(user).not.toBeNull();
    const { cp, id } = sandbox();
    const marker = `af-uid-marker-${process.pid}`;
    const running = cp.run(id, `sleep 30 # ${marker}`, { timeoutMs: 20_000 });
    const seen = await waitForHost(marker);
    const session = await cp.createSession(id);
    try {
      await session.run(`sh -c 'sleep 30 # ${marker}-session' &`);
      seen.push(...(await waitForHost(`${marker}-session`)));
    } finally {
      await cp.closeSession(session.id);
    }
    await cp.stopSandbox(id);
    await running.catch(() => undefined);
    // the command (bwrap monitor, pid 1, sh) and the session shell's child
    expect(seen.filter((p) => p.pid > 0).length).toBeGreaterThanOrEqual(2);
    for (const p of seen) {
      // real, effective, saved and filesystem uid: all the sandbox user, none root
      expect(p.uid.split(/\s+/)).toEqual(Array(4).fill(String(user?.uid)));
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

  it('the runtime reports the sandbox user as the workspace owner (the worker mounts for it)', () => {
    const runtime = createBwrapRuntime();
    expect(runtime.traits.hostOwner).toEqual({ uid: user?.uid, gid: user?.gid });
    expect(runtime.traits.needsAllowOther).toBe(true);
  });
});
