// Sandboxes over one codebase: isolation between them, commit into the linked directory, conflicts with
// changes made behind a sandbox's back, and the delta operations on a stopped sandbox.
import { lstat, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlane } from '@agentfense/control';
import { closePlane, mountsUnder, openPlaneOverExample } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

describe('deltas, commit and conflicts', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;

  beforeAll(async () => {
    ({ dirs, cp, codebaseId } = await openPlaneOverExample());
  });
  afterAll(async () => {
    await closePlane(cp, dirs);
  });

  async function running(options: { preset?: string } = {}): Promise<string> {
    const { id } = await cp.createSandbox({ codebaseId, ...options });
    await cp.startSandbox(id);
    return id;
  }

  it('keeps two sandboxes on one codebase isolated from each other', async () => {
    const a = await running();
    const b = await running();
    await cp.run(a, 'echo "A data" > /workspace/output/report.txt');
    await cp.run(b, 'echo "B data" > /workspace/output/report.txt');
    expect((await cp.run(a, 'cat /workspace/output/report.txt')).stdout).toBe('A data\n');
    expect((await cp.run(b, 'cat /workspace/output/report.txt')).stdout).toBe('B data\n');
    await cp.run(a, 'echo only-a > /workspace/output/a-only.txt');
    expect((await cp.run(b, 'ls /workspace/output')).stdout).not.toContain('a-only');
    expect(await readdir(join(dirs.repo, 'output'))).toEqual(['.keep']);
    await cp.destroySandbox(a);
    await cp.destroySandbox(b);
  });

  it('commits into the linked directory and empties the delta', async () => {
    const id = await running();
    await cp.run(id, 'mkdir -p /workspace/output/sub && echo done > /workspace/output/sub/result.txt');
    const result = await cp.commit(id);
    expect(result.conflicts).toEqual([]);
    expect(result.applied.map((c) => c.path)).toContain('/output/sub/result.txt');
    expect(await readFile(join(dirs.repo, 'output/sub/result.txt'), 'utf8')).toBe('done\n');
    expect(await cp.changes(id)).toEqual([]);
    await cp.destroySandbox(id);
  });

  it('reports a conflict when the codebase changed behind the sandbox, unless last-writer-wins', async () => {
    const id = await running({ preset: 'development' });
    expect((await cp.run(id, 'cat /workspace/src/util.py')).exitCode).toBe(0);
    await cp.run(id, 'echo "sandbox version" > /workspace/src/util.py');
    await writeFile(join(dirs.repo, 'src/util.py'), 'host version\n');
    const first = await cp.commit(id);
    expect(first.conflicts.map((c) => c.path)).toEqual(['/src/util.py']);
    expect(await readFile(join(dirs.repo, 'src/util.py'), 'utf8')).toBe('host version\n');
    const forced = await cp.commit(id, { mode: 'last-writer-wins' });
    expect(forced.conflicts).toEqual([]);
    expect(await readFile(join(dirs.repo, 'src/util.py'), 'utf8')).toBe('sandbox version\n');
    await cp.destroySandbox(id);
  });

  it('serves changes, diff, commit and discard of a stopped sandbox through a temporary worker', async () => {
    const id = await running();
    await cp.run(id, 'echo one > /workspace/output/one.txt; echo two > /workspace/output/two.txt');
    await cp.stopSandbox(id);
    expect((await cp.getSandbox(id)).state).toBe('STOPPED');
    expect(await mountsUnder(dirs.dataDir)).toEqual([]);
    expect((await cp.changes(id)).map((c) => c.path).sort()).toEqual(['/output/one.txt', '/output/two.txt']);
    expect((await cp.diff(id)).diff).toContain('+one');
    await cp.discard(id, { paths: ['/output/two.txt'] });
    expect((await cp.changes(id)).map((c) => c.path)).toEqual(['/output/one.txt']);
    expect(await mountsUnder(dirs.dataDir)).toEqual([]);
    expect((await cp.getSandbox(id)).ownerPid).toBeNull();
    // Started again, it sees what is left of its delta.
    await cp.startSandbox(id);
    expect((await cp.run(id, 'cat /workspace/output/one.txt')).stdout).toBe('one\n');
    expect((await cp.run(id, 'ls /workspace/output')).stdout).not.toContain('two.txt');
    await cp.destroySandbox(id);
    expect(await mountsUnder(dirs.dataDir)).toEqual([]);
  });

  it('exec on a sandbox that is not running is a WrongStateError', async () => {
    const { id } = await cp.createSandbox({ codebaseId });
    await expect(cp.run(id, 'true')).rejects.toThrow(/PENDING, not RUNNING/);
    await cp.destroySandbox(id);
  });

  it('a symlink the sandbox plants cannot make a commit write outside the codebase', async () => {
    const outside = join(dirs.root, 'outside');
    const id = await running({ preset: 'full-access' });
    // The agent replaces a directory with a symlink to a host path and writes "through" it.
    const r = await cp.run(
      id,
      `rm -rf /workspace/docs && ln -s ${outside} /workspace/docs && ln -s ${outside}/planted /workspace/link.txt; ` +
        `echo pwned > /workspace/docs/guide.md; echo pwned > /workspace/link.txt; true`,
    );
    expect(r.exitCode).toBe(0);
    // Through the library, too: the worker must not follow the symlinks it stored.
    await expect(cp.writeFile(id, '/docs/evil.txt', 'pwned')).rejects.toThrow();
    const result = await cp.commit(id, { mode: 'last-writer-wins' });
    expect(result.conflicts).toEqual([]);
    await expect(readdir(outside)).rejects.toThrow(/ENOENT/);
    // The symlinks arrive as symlinks and nothing was written through them.
    expect((await lstat(join(dirs.repo, 'docs'))).isSymbolicLink()).toBe(true);
    await cp.destroySandbox(id);
  });
});
