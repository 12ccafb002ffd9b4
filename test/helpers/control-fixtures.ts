// Shared set-up of the control-plane system tests: a throwaway data directory and example codebase per
// test, and the check that no FUSE mount (or shared bind) of that data directory is left behind.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { expect } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';
import { ControlPlane } from '@agentfense/control';
import type { ControlPlaneOptions } from '@agentfense/control';

/** The example codebase of the seeds: code, docs, an output dir, and secrets of every kind. */
export const EXAMPLE_FILES: Readonly<Record<string, string>> = {
  'README.md': '# demo\n',
  'src/app.py': 'print("hello")\n',
  'src/util.py': 'def f():\n    return 1\n',
  'docs/guide.md': 'guide\n',
  'output/.keep': '',
  'secrets/private.key': 'PRIVATE-KEY-CONTENT\n',
  'secrets/public.key': 'PUBLIC-KEY-CONTENT\n',
  '.env': 'API_TOKEN=hunter2\n',
  'config/credentials.json': '{"password":"hunter2"}\n',
  'deploy.pem': 'PEM\n',
};

export interface TestDirs {
  readonly root: string;
  readonly dataDir: string;
  readonly repo: string;
}

/** A fresh temp root with `data/` (the data directory) and `repo/` (the example codebase). */
export async function makeDirs(files: Readonly<Record<string, string>> = EXAMPLE_FILES): Promise<TestDirs> {
  const root = await mkdtemp(join(tmpdir(), 'af-control-'));
  const dataDir = join(root, 'data');
  const repo = join(root, 'repo');
  await writeTree(repo, files);
  return { root, dataDir, repo };
}

export async function writeTree(dir: string, files: Readonly<Record<string, string>>): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
}

/** Mounts (of any type) at or below `dir`. */
export async function mountsUnder(dir: string): Promise<string[]> {
  return (await listMounts()).map((m) => m.mountpoint).filter((p) => p === dir || p.startsWith(`${dir}/`));
}

/** Fails when any mount is left under `dir`, then removes it. */
export async function assertCleanAndRemove(dirs: TestDirs): Promise<void> {
  expect(await mountsUnder(dirs.root)).toEqual([]);
  // A log line flushed while the tree is removed can refill a directory already emptied (ENOTEMPTY).
  await rm(dirs.root, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
}

/** Polls `check` until it returns a defined value or `timeoutMs` passes (then fails naming `what`). */
export async function waitFor<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** True while a process with this pid exists (zombies included). */
export function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A control plane over a fresh data directory with the example codebase linked (a suite's beforeAll);
 * `options` are added to the data directory for ControlPlane.open.
 */
export async function openPlaneOverExample(options: ControlPlaneOptions = {}): Promise<{
  dirs: TestDirs;
  cp: ControlPlane;
  codebaseId: string;
}> {
  const dirs = await makeDirs();
  const cp = await ControlPlane.open({ ...options, dataDir: dirs.dataDir });
  return { dirs, cp, codebaseId: (await cp.linkCodebase({ path: dirs.repo })).id };
}

/** Destroys every sandbox of `cp` and closes it (undefined: the suite's set-up failed before opening). */
export async function destroyAllAndClose(cp: ControlPlane | undefined): Promise<void> {
  for (const sb of (await cp?.listSandboxes())?.items ?? []) await cp?.destroySandbox(sb.id);
  await cp?.close();
}

/** Destroys every sandbox of `cp`, closes it, and checks no mount is left (a suite's afterAll). */
export async function closePlane(cp: ControlPlane | undefined, dirs: TestDirs | undefined): Promise<void> {
  await destroyAllAndClose(cp);
  if (dirs !== undefined) await assertCleanAndRemove(dirs);
}

/** Runs `command` in sandbox `id` and returns its stdout, failing the test (with its stderr) unless it exits 0. */
export async function runOk(cp: ControlPlane, id: string, command: string): Promise<string> {
  const result = await cp.run(id, command);
  expect(result.exitCode, result.stderr).toBe(0);
  return result.stdout;
}
