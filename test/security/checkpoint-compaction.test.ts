// Attacks through a stack's background compaction. A hostile agent controls every entry of its layers,
// symlinks included, and knows where the data directory keeps other sandboxes' layers. The merged layer
// is built on the host as root: it must never follow such a symlink, so it can neither copy or link
// another sandbox's files into the attacker's layer nor place anything outside it.
import { lstat, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { closePlane, makeDirs, waitFor } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

const SECRET = 'VICTIM-LAYER-SECRET';

/** Every file's content below `dir` on the host, never following a symlink. */
async function hostFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await hostFiles(path)));
    else if (entry.isFile()) out.push(await readFile(path, 'utf8'));
  }
  return out;
}

describe('compaction attacks', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;

  beforeAll(async () => {
    dirs = await makeDirs({ 'README.md': '# demo\n', 'out/.keep': '' });
    cp = await ControlPlane.open({ dataDir: dirs.dataDir, checkpoints: { maxStackDepth: 2 } });
    codebaseId = (await cp.linkCodebase({ path: dirs.repo })).id;
  });
  afterAll(() => closePlane(cp, dirs));

  it(
    "never follows a symlink of the attacker's layer to another sandbox's layer",
    { timeout: 240_000 },
    async () => {
      const layers = join(dirs.dataDir, 'layers');
      const victim = (await cp.createSandbox({ codebaseId, preset: 'full-access' })).id;
      await cp.writeFile(victim, '/out/secret.txt', SECRET);
      await cp.checkpoint(victim);
      const [victimLayer] = await readdir(layers);
      const target = join(layers, victimLayer!, 'upper', 'out');
      const attacker = (await cp.createSandbox({ codebaseId, preset: 'full-access' })).id;
      await cp.startSandbox(attacker);
      // Symlinks to the victim's layer (a directory and a file) and to the host's root, in the layers the
      // compaction folds; a directory of the attacker's own beside them.
      const plant = await cp.run(
        attacker,
        `cd /workspace/out && ln -s ${target} dir && ln -s ${target}/secret.txt file && ln -s / root && ` +
          'mkdir own && echo mine > own/f',
      );
      expect(plant.exitCode, plant.stderr).toBe(0);
      const first = await cp.checkpoint(attacker);
      await cp.deleteCheckpoint(attacker, first.id);
      await cp.run(attacker, 'echo more > /workspace/out/more');
      await cp.checkpoint(attacker);
      await cp.run(attacker, 'echo last > /workspace/out/last');
      const early = new Set(await readdir(layers)); // the victim's and the two to fold
      await cp.checkpoint(attacker); // depth 3 > 2: the two first layers are folded
      const merged = await waitFor(
        'the compaction',
        async () => {
          const now = await readdir(layers);
          const fresh = now.filter((n) => !early.has(n));
          return now.length === 3 && fresh.length === 2 ? now : undefined;
        },
        60_000,
      ).then(async (now) => {
        const last = (await cp.listCheckpoints(attacker)).at(-1);
        expect(last?.depth).toBe(2);
        // The merged layer: new, and not the third checkpoint's own (the newest, not folded).
        const fresh = now.filter((n) => !early.has(n));
        const heldAbove = await Promise.all(
          fresh.map(async (n) => (await readdir(join(layers, n, 'upper', 'out'))).includes('last')),
        );
        return fresh[heldAbove.indexOf(false)] as string;
      });
      const upper = join(layers, merged, 'upper', 'out');
      // The symlinks are symlinks in the merged layer, to the same targets; nothing of the victim came in.
      for (const name of ['dir', 'file', 'root'])
        expect((await lstat(join(upper, name))).isSymbolicLink()).toBe(true);
      expect(await hostFiles(join(layers, merged))).not.toContain(SECRET);
      expect((await readdir(join(upper, 'own'))).sort()).toEqual(['f']);
      // The attacker's view is as before, and the victim's layer is whole.
      const seen = await cp.run(
        attacker,
        'cd /workspace/out && readlink dir file root && cat own/f more last',
      );
      expect(seen.stdout).toBe(`${target}\n${target}/secret.txt\n/\nmine\nmore\nlast\n`);
      expect(await readFile(join(target, 'secret.txt'), 'utf8')).toBe(SECRET);
      await cp.destroySandbox(attacker);
      await cp.destroySandbox(victim);
    },
  );
});
