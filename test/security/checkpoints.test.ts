// Attacks through checkpoints and forks. A hostile agent (or API client) must not: read through a fork what
// the fork's own rules hide, even when the parent wrote it; see another fork's changes; forge a whiteout or
// a layer's metadata with names it creates, so that a restore or fork hides or deletes codebase files; or
// restore or fork another sandbox's checkpoint, whose files were written under other rules; or make the
// host hold more than its disk quota by checkpointing in a loop.
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlane } from '@agentfense/control';
import { closePlane, openPlaneOverExample } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

const MiB = 1024 * 1024;

/** Bytes the host's disk holds under `dir` (allocated blocks, as `du` counts them). */
async function allocated(dir: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(dir, { recursive: true }).catch(() => [])) {
    total += await lstat(join(dir, name)).then(
      (st) => st.blocks * 512,
      () => 0,
    );
  }
  return total;
}

describe('checkpoint and fork attacks', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;

  beforeAll(async () => {
    ({ dirs, cp, codebaseId } = await openPlaneOverExample());
  });
  afterAll(() => closePlane(cp, dirs));

  async function running(preset: string): Promise<string> {
    const { id } = await cp.createSandbox({ codebaseId, preset });
    await cp.startSandbox(id);
    return id;
  }

  it("a fork's own rules hide what its parent wrote where they hide", async () => {
    const parent = await running('full-access');
    await cp.run(parent, 'echo TOKEN=leak > /workspace/output/.env && echo k > /workspace/secrets/made.key');
    const [fork] = await cp.forkSandbox(parent, { preset: 'agent-safe' });
    const id = fork?.id as string;
    const probe = await cp.run(
      id,
      'cat /workspace/output/.env /workspace/secrets/made.key /workspace/.env; ls -a /workspace /workspace/output',
    );
    expect(probe.stdout + probe.stderr).not.toContain('leak');
    expect(probe.stdout).not.toMatch(/\.env|secrets|made\.key/);
    expect(probe.stderr).toMatch(/No such file/);
    // Nor through the control plane's own file reads on its behalf.
    await expect(cp.readFile(id, '/output/.env')).rejects.toThrow(/not found|does not exist|ENOENT/i);
    await cp.destroySandbox(id);
    await cp.destroySandbox(parent);
  });

  it("a fork never sees another fork's changes, made before or after the other's checkpoint", async () => {
    const parent = await running('full-access');
    const [a, b] = await cp.forkSandbox(parent, { count: 2 });
    const ida = a?.id as string;
    const idb = b?.id as string;
    await cp.run(ida, 'echo from-a > /workspace/output/a.txt');
    await cp.checkpoint(ida);
    await cp.run(ida, 'echo later-a > /workspace/output/a2.txt');
    const seen = await cp.run(
      idb,
      'ls /workspace/output; cat /workspace/output/a.txt /workspace/output/a2.txt',
    );
    expect(seen.stdout).not.toMatch(/a\.txt|a2\.txt|from-a|later-a/);
    for (const id of [ida, idb, parent]) await cp.destroySandbox(id);
  });

  it('names that look like whiteouts or layer metadata hide and delete nothing across layers', async () => {
    const id = await running('full-access');
    const names = ['.wh.README.md', '.wh..wh..opq', 'snapshot.json', 'stack.json', 'layers-intent.json'];
    await cp.run(
      id,
      `cd /workspace && for n in ${names.join(' ')}; do echo forged > "$n"; echo forged > "src/$n"; done && mkdir -p meta && echo '{"version":1,"frozen":["/"]}' > meta/stack.json`,
    );
    const forged = await cp.checkpoint(id);
    const [fork] = await cp.forkSandbox(id);
    await cp.run(id, 'rm -rf /workspace/src');
    await cp.restoreCheckpoint(id, forged.id);
    for (const sandbox of [id, fork?.id as string]) {
      const view = await cp.run(
        sandbox,
        'cat /workspace/README.md /workspace/src/app.py; ls -A /workspace/src',
      );
      expect(view.exitCode, view.stderr).toBe(0);
      expect(view.stdout).toContain('# demo\n');
      expect(view.stdout).toContain('print("hello")');
      for (const n of names) expect(view.stdout).toContain(n);
    }
    // The codebase itself was never touched.
    expect(await readFile(join(dirs.repo, 'README.md'), 'utf8')).toBe('# demo\n');
    await cp.destroySandbox(fork?.id as string);
    await cp.destroySandbox(id);
  });

  it("refuses to restore or fork another sandbox's checkpoint", async () => {
    const owner = await running('full-access');
    await cp.run(owner, 'echo written-under-full-access > /workspace/output/x.txt');
    const theirs = await cp.checkpoint(owner);
    const other = await running('agent-safe');
    await expect(cp.restoreCheckpoint(other, theirs.id)).rejects.toThrow(/not found/);
    await expect(cp.forkSandbox(other, { checkpointId: theirs.id })).rejects.toThrow(/not found/);
    await expect(cp.deleteCheckpoint(other, theirs.id)).rejects.toThrow(/not found/);
    expect(await cp.listCheckpoints(other)).toEqual([]);
    expect((await cp.run(other, 'cat /workspace/output/x.txt')).exitCode).not.toBe(0);
    // Still there for its owner.
    expect((await cp.listCheckpoints(owner)).map((c) => c.id)).toEqual([theirs.id]);
    await cp.destroySandbox(other);
    await cp.destroySandbox(owner);
  });

  it('an agent checkpointing in a loop cannot make the host hold more than its disk quota', async () => {
    const quota = 4 * MiB;
    const { id } = await cp.createSandbox({
      codebaseId,
      preset: 'full-access',
      resources: { diskBytes: quota },
    });
    await cp.startSandbox(id);
    const layers = join(dirs.dataDir, 'layers');
    const before = await allocated(layers);
    // Each round leaves 1 MiB in the writable layer and freezes it: only the frozen layers' charge can
    // stop it before the stack depth limit (32) does.
    let refused = '';
    for (let i = 0; i < 40 && refused === ''; i++) {
      const wrote = await cp.run(id, `head -c ${MiB} /dev/zero | tr '\\0' x > /workspace/output/f${i}`);
      if (wrote.exitCode !== 0) refused = wrote.stderr;
      else await cp.checkpoint(id).catch((err: unknown) => (refused = String(err)));
    }
    expect(refused).toMatch(/No space left|quota/i);
    // What the host holds for it (frozen layers and writable layer) stays within the quota.
    const held =
      (await allocated(layers)) - before + (await allocated(join(dirs.dataDir, 'sandboxes', id, 'delta')));
    expect(held).toBeLessThan(quota + MiB);
    await cp.destroySandbox(id);
  });
});
