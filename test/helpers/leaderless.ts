// The leaderless-thread-group attack, for each runtime (zombie-leader.test.ts, docker-zombie-leader.test.ts).
// A process whose main thread calls exit(2) (not exit_group) while another thread lives on shows as a
// zombie ("Z") in /proc, yet keeps running. A command leaves one behind; it must be gone when the command
// ends, and later commands of the sandbox must not wait for it.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { assertCleanAndRemove, makeDirs } from './control-fixtures.js';
import type { TestDirs } from './control-fixtures.js';

/** The program's source; compiled into the codebase at /src/leaderless before the sandbox starts. */
const SOURCE = fileURLToPath(new URL('leaderless.c', import.meta.url));

/**
 * Starts the program in the background, waits until its leader is a zombie, then prints its pid and its
 * State/Threads lines. Its output goes nowhere, so the command's pipes close when the command ends.
 */
const LEADERLESS = `/workspace/src/leaderless >/dev/null 2>&1 &
p=$!
for i in $(seq 200); do grep -q "^State:.Z" /proc/$p/status && break; sleep 0.05; done
echo $p
grep -E "^(State|Threads):" /proc/$p/status`;

/** In the sandbox: "alive" for each thread of `pid` that is not a zombie, then "checked". */
const probe = (pid: number): string =>
  `awk '/^State:/ && $2 != "Z" { print "alive" }' /proc/${String(pid)}/task/*/status 2>/dev/null; echo checked`;

/** How long a command that does nothing may take (the sweep's deadline it must not wait for is 5 s). */
const PROMPT_MS = 2_000;

/** Registers the attack's test against a sandbox of `runtime`, made and destroyed around it. */
export function leaderlessAttack(runtime: 'bwrap' | 'docker'): void {
  let dirs: TestDirs | undefined;
  let cp: ControlPlane | undefined;
  let id = '';

  beforeAll(async () => {
    dirs = await makeDirs();
    await execa('cc', ['-O2', '-static', '-pthread', '-o', join(dirs.repo, 'src', 'leaderless'), SOURCE]);
    cp = await ControlPlane.open({ dataDir: dirs.dataDir, dockerPoolSize: 0 });
    const { id: codebaseId } = await cp.linkCodebase({ path: dirs.repo });
    ({ id } = await cp.createSandbox({ codebaseId, preset: 'agent-safe', runtime }));
    await cp.startSandbox(id);
  }, 120_000);
  afterAll(async () => {
    for (const sb of (await cp?.listSandboxes())?.items ?? []) await cp?.destroySandbox(sb.id);
    await cp?.close();
    if (dirs !== undefined) await assertCleanAndRemove(dirs);
  }, 60_000);

  it('a thread whose leader exited is gone when its command ends, and later commands are prompt', async () => {
    const plane = cp as ControlPlane;
    const first = await plane.run(id, LEADERLESS, { timeoutMs: 30_000 });
    expect(first.exitCode, first.stderr).toBe(0);
    const [pidLine, ...status] = first.stdout.trim().split('\n');
    // The attack works: the leader is a zombie and a second thread is alive.
    expect(status).toEqual([expect.stringMatching(/^State:\s+Z/), expect.stringMatching(/^Threads:\s+2$/)]);
    for (let n = 0; n < 3; n++) {
      const next = await plane.run(id, probe(Number(pidLine)), { timeoutMs: 30_000 });
      expect(next.stdout).toBe('checked\n');
      expect(next.durationMs).toBeLessThan(PROMPT_MS);
    }
  }, 60_000);
}
