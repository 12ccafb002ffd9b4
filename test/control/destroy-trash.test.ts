// Destroy renames a sandbox's directory into the data directory's trash and removes it in the background
// (a 200,000-file delta took minutes to remove in place, with the caller waiting). What a process left in
// the trash when it died is finished by the next process that opens the data directory, and by gc; a
// destroy that cannot remove everything (something mounted inside) still fails and keeps the sandbox in
// ERROR (test/security/destroy-failure.test.ts).
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it, onTestFinished } from 'vitest';
import { ControlPlane } from '@agentfense/control';

let scratch: string;
let repo: string;
let data: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-trash-'));
  repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  await mkdir(repo);
  await writeFile(join(repo, 'README.md'), 'hi\n');
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

const trashOf = (): Promise<string[]> => readdir(join(data, 'trash')).catch(() => []);

/** What a process that died while removing a destroyed sandbox leaves: a half-removed tree in the trash. */
async function halfRemoved(name: string): Promise<string> {
  const entry = join(data, 'trash', `sb_00000000-0000-4000-8000-00000000000${name}.left`);
  await mkdir(join(entry, 'delta', 'a', 'b'), { recursive: true });
  await writeFile(join(entry, 'delta', 'a', 'b', 'file'), 'x');
  await writeFile(join(entry, 'delta', 'top'), 'y');
  return entry;
}

it('destroy takes the sandbox away at once, its files leave through the trash, and close waits for them', async () => {
  const cp = await ControlPlane.open({ dataDir: data, workerPoolSize: 0 });
  onTestFinished(() => cp.close());
  const { id: codebaseId } = await cp.linkCodebase({ path: repo });
  const { id } = await cp.createSandbox({ codebaseId, preset: 'full-access' });
  await cp.startSandbox(id);
  const made = await cp.run(
    id,
    'mkdir /workspace/d && for i in $(seq 300); do echo $i > /workspace/d/f$i; done',
  );
  expect(made.exitCode).toBe(0);
  await cp.destroySandbox(id);
  expect((await cp.listSandboxes()).items).toEqual([]);
  await expect(stat(join(data, 'sandboxes', id))).rejects.toThrow(/ENOENT/);
  await cp.close();
  expect(await trashOf()).toEqual([]);
  expect(await readdir(repo)).toEqual(['README.md']);
});

it('a removal a dead process left half-way is finished by the next process that opens the data directory', async () => {
  await halfRemoved('1');
  const cp = await ControlPlane.open({ dataDir: data, workerPoolSize: 0 });
  await cp.close();
  expect(await trashOf()).toEqual([]);
});

it('gc finishes what is left in the trash and reports it among the removed directories', async () => {
  const cp = await ControlPlane.open({ dataDir: data, workerPoolSize: 0 });
  onTestFinished(() => cp.close());
  // Left after this process opened the data directory (its own sweep has run): only gc finds it.
  const entry = await halfRemoved('2');
  expect((await cp.gc({ dryRun: true })).directories).toContain(entry);
  expect(await trashOf()).toHaveLength(1);
  const report = await cp.gc();
  expect(report.directories).toContain(entry);
  expect(report.errors).toEqual([]);
  expect(await trashOf()).toEqual([]);
});
