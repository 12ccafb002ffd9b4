// 25 nested directories of 200-character names plus a 300 MB file made `run` fail with
// ENAMETOOLONG on unlink, and the sandbox vanished from the list while its delta (301 MB) stayed on disk;
// with 3000 levels the change list exceeded the wire's frame limit. Delta, diff, commit, the change
// listing and destroy must work at any depth and name length (directory fds, answers in parts).
import { closeSync, fstatSync, openSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlane } from '@agentfense/control';
import { removeTree } from '@agentfense/fuse-worker';
import { DEFAULT_MAX_FRAME_BYTES } from '@agentfense/protocol';
import { destroyAllAndClose, mountsUnder, openPlaneOverExample } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

/** Size of the file at `names` below `root`, opened one component at a time (no long path anywhere). */
function sizeAt(root: string, names: readonly string[], file: string): number {
  let fd = openSync(root, 'r');
  try {
    for (const name of names) {
      const next = openSync(`/proc/self/fd/${fd}/${name}`, 'r');
      closeSync(fd);
      fd = next;
    }
    const f = openSync(`/proc/self/fd/${fd}/${file}`, 'r');
    try {
      return fstatSync(f).size;
    } finally {
      closeSync(f);
    }
  } finally {
    closeSync(fd);
  }
}

describe('any depth and name length', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;

  beforeAll(async () => {
    ({ dirs, cp, codebaseId } = await openPlaneOverExample());
  });
  afterAll(async () => {
    await destroyAllAndClose(cp);
    expect(await mountsUnder(dirs.root)).toEqual([]);
    // The committed tree is as deep as the sandbox made it: fs.rm could not remove it either.
    await removeTree(dirs.root);
  });

  it('25 levels of 200-character names and a 300 MB file: changes, diff, commit and destroy', async () => {
    const { id } = await cp.createSandbox({ codebaseId });
    await cp.startSandbox(id);
    const name = 'd'.repeat(200);
    // Relative mkdir + chdir: a shell's cd would build the whole path and stop at PATH_MAX.
    const made = await cp.run(id, [
      'python3',
      '-c',
      `import os\nos.chdir('/workspace/output')\nfor _ in range(25):\n    os.mkdir('${name}'); os.chdir('${name}')\n` +
        `with open('big', 'wb') as f:\n    for _ in range(300): f.write(bytes(1 << 20))\nprint('ok')`,
    ]);
    expect(made.stderr + made.stdout).toBe('ok\n');
    const changes = await cp.changes(id);
    expect(changes).toHaveLength(26);
    const deepest = changes.find((c) => c.path.endsWith('/big'));
    expect(deepest).toMatchObject({ kind: 'added', type: 'file', size: 300 * 1024 * 1024 });
    expect(deepest?.path.length).toBeGreaterThan(5000);
    expect((await cp.diff(id)).binary).toEqual([deepest?.path]);
    const result = await cp.commit(id);
    expect(result.conflicts).toEqual([]);
    expect(result.applied).toHaveLength(26);
    expect(sizeAt(join(dirs.repo, 'output'), Array(25).fill(name), 'big')).toBe(300 * 1024 * 1024);
    const sandboxDir = join(dirs.dataDir, 'sandboxes', id);
    await cp.destroySandbox(id);
    await expect(access(sandboxDir)).rejects.toMatchObject({ code: 'ENOENT' });
    expect((await cp.listSandboxes()).items.map((s) => s.id)).not.toContain(id);
  }, 180_000);

  it('3000 levels: a change list larger than a frame arrives in parts, and destroy removes it all', async () => {
    const { id } = await cp.createSandbox({ codebaseId });
    await cp.startSandbox(id);
    const name = 'x'.repeat(30);
    const made = await cp.run(id, [
      'python3',
      '-c',
      `import os\nos.chdir('/workspace/output')\nfor _ in range(3000):\n    os.mkdir('${name}'); os.chdir('${name}')\n` +
        `open('leaf.txt', 'w').write('leaf\\n')\nprint('ok')`,
    ]);
    expect(made.stderr + made.stdout).toBe('ok\n');
    const changes = await cp.changes(id);
    expect(changes).toHaveLength(3001);
    const bytes = changes.reduce((n, c) => n + c.path.length, 0);
    expect(bytes).toBeGreaterThan(DEFAULT_MAX_FRAME_BYTES);
    expect(changes.at(-1)?.path.endsWith(`/${name}/leaf.txt`)).toBe(true);
    const diff = await cp.diff(id);
    expect(diff.diff).toContain('+leaf\n');
    const sandboxDir = join(dirs.dataDir, 'sandboxes', id);
    await cp.destroySandbox(id);
    await expect(access(sandboxDir)).rejects.toMatchObject({ code: 'ENOENT' });
  }, 300_000);
});
