// Kill -9 of `serve` during parallel create+exec+destroy cycles, then a restart, left 47
// sandboxes PENDING with their directories forever. Now a sandbox created through the API is owned by its
// server from birth, so the next server's recovery settles it whatever step it was in (created, starting,
// running, being destroyed); recovery kills what the dead server left running, and the gc at start removes
// directories no record names. After the restart: nothing PENDING or RUNNING, no mount, no relay, no
// sandbox process, no orphan directory; and everything can be destroyed.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RUN_DIR } from '@agentfense/runtime-bwrap';
import { client, launchServer, mountsUnder, scratch, stopAndCheck } from '../helpers/http-fixture.js';
import type { Served } from '../helpers/http-fixture.js';

/** Pids of processes whose command line holds `text`. */
async function processesWith(text: string): Promise<number[]> {
  const { readFile } = await import('node:fs/promises');
  const out: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    const cmdline = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(text)) out.push(Number(name));
  }
  return out;
}

async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('kill -9 of serve during parallel create + exec + destroy', () => {
  it('after a restart nothing is PENDING, mounted, running or orphaned', { timeout: 180_000 }, async () => {
    const dataDir = join(await scratch('af-serve-crash-'), 'data');
    let served: Served | undefined = await launchServer([], dataDir);
    const marker = `af_crash_${process.pid}_${Date.now()}`;
    const seen = new Set<string>();
    try {
      const call = client(served.url, served.token);
      const codebase = await call('POST', '/v1/codebases', { name: 'crash' });
      expect(codebase.status).toBe(200);
      const cb = (codebase.json as { id: string }).id;
      expect((await call('PUT', `/v1/codebases/${cb}/files/src/a.txt`, 'a\n')).status).toBe(200);

      // Six loops of create(start) → exec → destroy; serve is killed once several cycles are under way.
      let created = 0;
      let killed = false;
      const loop = async (_: unknown, index: number): Promise<void> => {
        while (!killed) {
          try {
            const sb = await call('POST', '/v1/sandboxes', { codebase_id: cb, start: true });
            if (sb.status !== 200) continue;
            const id = (sb.json as { id: string }).id;
            seen.add(id);
            created += 1;
            // Half the loops hold a command for a while (left running by the crash), half start more.
            await call('POST', `/v1/sandboxes/${id}/exec`, {
              command: `echo ${marker} >/dev/null; sleep ${index % 2 === 0 ? '0.5' : '0'}; cat /workspace/src/a.txt`,
            });
            await call('DELETE', `/v1/sandboxes/${id}`);
          } catch {
            // The server died under the request: expected.
          }
        }
      };
      const loops = Array.from({ length: 6 }, loop);
      await waitUntil('cycles to be under way', () => Promise.resolve(created >= 6), 120_000);
      // Kill at a moment when a start is under way (a sandbox PENDING), the state that used to stick.
      let pendingAtKill: string[] = [];
      await waitUntil(
        'a sandbox caught starting',
        async () => {
          const pending = await call('GET', '/v1/sandboxes?status=pending');
          pendingAtKill = (pending.json as { sandboxes: { id: string }[] }).sandboxes.map((s) => s.id);
          return pendingAtKill.length > 0;
        },
        120_000,
      );
      served.child.kill('SIGKILL');
      killed = true;
      await served.child;
      await Promise.all(loops);
      served = undefined;

      // The restart: recovery and gc run before it serves.
      served = await launchServer([], dataDir);
      const again = client(served.url, served.token);
      const list = await again('GET', '/v1/sandboxes?page_size=1000');
      expect(list.status).toBe(200);
      const sandboxes = (list.json as { sandboxes: { id: string; status: string; statusReason: string }[] })
        .sandboxes;
      const states = sandboxes.map((s) => `${s.id} ${s.status} ${s.statusReason}`);
      expect(states.filter((s) => /(PENDING|RUNNING) /.test(s))).toEqual([]);
      // The sandbox caught starting is settled (STOPPED, saying why), not left PENDING or lost.
      for (const id of pendingAtKill) {
        expect(sandboxes.find((s) => s.id === id)?.statusReason).toMatch(
          /recovered: .* while the sandbox was/,
        );
      }
      // Nothing mounted, nothing in the run directory, nothing of the sandboxes still running.
      expect(await mountsUnder(dataDir)).toEqual([]);
      const runEntries = await readdir(DEFAULT_RUN_DIR).catch(() => [] as string[]);
      expect(runEntries.filter((e) => [...seen].some((id) => e.startsWith(id)))).toEqual([]);
      await waitUntil(
        'the dead server’s commands to be gone',
        async () => (await processesWith(marker)).length === 0,
      );
      // Every directory left is a listed sandbox's (its delta kept for inspection).
      const listed = new Set(sandboxes.map((s) => s.id));
      const dirs = await readdir(join(dataDir, 'sandboxes')).catch(() => [] as string[]);
      expect(dirs.filter((d) => !listed.has(d))).toEqual([]);
      // And each can be destroyed, leaving nothing.
      for (const s of sandboxes) expect((await again('DELETE', `/v1/sandboxes/${s.id}`)).status).toBe(200);
      expect(await readdir(join(dataDir, 'sandboxes')).catch(() => [] as string[])).toEqual([]);
      await stopAndCheck(served);
      served = undefined;
    } finally {
      if (served !== undefined) {
        // A failure half-way: let a fresh server recover the data directory, then remove everything.
        served.child.kill('SIGKILL');
        await served.child;
        const cleaner = await launchServer([], dataDir);
        const call = client(cleaner.url, cleaner.token);
        const left = await call('GET', '/v1/sandboxes?page_size=1000');
        for (const { id } of (left.json as { sandboxes: { id: string }[] }).sandboxes)
          await call('DELETE', `/v1/sandboxes/${id}`);
        await cleaner.stop();
      }
    }
  });
});
