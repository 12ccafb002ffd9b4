// A control plane over a throwaway data directory with the example codebase and one running bwrap sandbox
// (preset agent-safe, default limits), for the runtime attack tests. Everything is destroyed afterwards and
// the test fails if a mount is left behind.
import { afterAll, beforeAll } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import type { ControlPlaneOptions } from '@agentfense/control';
import type { ExecResult } from '@agentfense/protocol';
import { assertCleanAndRemove, makeDirs } from './control-fixtures.js';
import type { TestDirs } from './control-fixtures.js';

export interface SandboxFixture {
  readonly cp: ControlPlane;
  readonly dirs: TestDirs;
  readonly id: string;
  /** Runs a shell command in the sandbox; stdout/stderr as strings. */
  run(command: string, timeoutMs?: number): Promise<ExecResult & { out: string; err: string }>;
}

/** Opens the control plane and starts one sandbox before the file's tests; tears it all down after. */
export function useSandbox(options: Omit<ControlPlaneOptions, 'dataDir'> = {}): () => SandboxFixture {
  let fixture: SandboxFixture | undefined;
  let dirs: TestDirs | undefined;
  let cp: ControlPlane | undefined;
  beforeAll(async () => {
    dirs = await makeDirs();
    cp = await ControlPlane.open({ ...options, dataDir: dirs.dataDir });
    const { id: codebaseId } = await cp.linkCodebase({ path: dirs.repo });
    const { id } = await cp.createSandbox({ codebaseId, preset: 'agent-safe' });
    await cp.startSandbox(id);
    const plane = cp;
    fixture = {
      cp: plane,
      dirs,
      id,
      run: async (command, timeoutMs = 60_000) => {
        const r = await plane.run(id, command, { timeoutMs, encoding: 'buffer' });
        return { ...r, out: r.stdout.toString(), err: r.stderr.toString() };
      },
    };
  }, 60_000);
  afterAll(async () => {
    for (const sb of (await cp?.listSandboxes())?.items ?? []) await cp?.destroySandbox(sb.id);
    await cp?.close();
    if (dirs !== undefined) await assertCleanAndRemove(dirs);
  }, 60_000);
  return () => {
    if (fixture === undefined) throw new Error('sandbox fixture not started');
    return fixture;
  };
}

/** A shell command running a Python script, the script single-quoted for `/bin/sh -c`. */
export function python(script: string): string {
  return `python3 -c '${script.replaceAll("'", `'\\''`)}'`;
}
