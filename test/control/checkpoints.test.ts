// Checkpoints on real sandboxes: the files as they were at each checkpoint come back on restore (files,
// directories, deletions, modes, symlinks, hard links), a running shell sees a restore at once, they work on
// a stopped sandbox and survive a control-plane restart, and their layers leave the disk with the last
// thing that holds them.
import { readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane, Sandbox } from '@agentfense/control';
import { closePlane, openPlaneOverExample, runOk } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

/** What `ls`, `cat` and `stat` show of the workspace's interesting paths, one line each. */
const SHOW = [
  'cd /workspace',
  'for p in README.md src/app.py src/util.py docs output/new.txt output/dir/f output/link output/hard; do',
  '  if [ -L "$p" ]; then echo "$p -> $(readlink "$p")";',
  '  elif [ -d "$p" ]; then echo "$p/ $(ls -A "$p" | tr "\\n" " ")";',
  '  elif [ -e "$p" ]; then echo "$p $(stat -c "%a %h" "$p") $(cat "$p")";',
  '  else echo "$p gone"; fi',
  'done',
].join('\n');

describe('checkpoints', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;

  beforeAll(async () => {
    ({ dirs, cp, codebaseId } = await openPlaneOverExample());
  });
  afterAll(() => closePlane(cp, dirs));

  async function running(): Promise<string> {
    const { id } = await cp.createSandbox({ codebaseId, preset: 'full-access' });
    await cp.startSandbox(id);
    return id;
  }
  const show = (id: string): Promise<string> => runOk(cp, id, SHOW);
  const sh = async (id: string, command: string): Promise<void> => void (await runOk(cp, id, command));

  it('restores each checkpoint exactly, across several layers, and lists them oldest first', async () => {
    const id = await running();
    const original = await show(id);
    await sh(
      id,
      'cd /workspace && echo one > output/new.txt && mkdir -p output/dir && echo f1 > output/dir/f && ' +
        'rm -r docs && chmod 600 src/app.py && ln -s new.txt output/link && ln output/new.txt output/hard',
    );
    const first = await cp.checkpoint(id, { name: 'first', message: 'files made' });
    const atFirst = await show(id);
    expect(atFirst).toBe(await show(id)); // a checkpoint changes nothing the sandbox sees
    expect(atFirst).toContain('output/new.txt 644 2 one');
    await sh(
      id,
      'cd /workspace && rm -r output/dir && echo readme2 > README.md && ' +
        'mkdir docs && echo back > docs/again.md && rm output/link && chmod 644 src/app.py && ' +
        'echo more >> output/dir2.txt',
    );
    const second = await cp.checkpoint(id, { name: 'second' });
    const atSecond = await show(id);
    await sh(id, 'cd /workspace && echo three > output/new.txt && rm -rf src && touch output/late');

    await cp.restoreCheckpoint(id, first.id);
    expect(await show(id)).toBe(atFirst);
    expect((await cp.run(id, 'ls /workspace/output')).stdout).not.toContain('late');
    await cp.restoreCheckpoint(id, second.id);
    expect(await show(id)).toBe(atSecond);
    expect((await cp.run(id, 'cat /workspace/docs/again.md; ls /workspace/docs')).stdout).toBe(
      'back\nagain.md\n',
    );

    expect((await cp.listCheckpoints(id)).map((c) => [c.id, c.name, c.message, c.depth])).toEqual([
      [first.id, 'first', 'files made', 1],
      [second.id, 'second', null, 2],
    ]);
    // Each is in the sandbox's audit trail.
    const trail = (await cp.audit(id)).filter((e) => ['checkpoint', 'restore'].includes(e.op));
    expect(trail.map((e) => [e.op, e.target])).toEqual([
      ['checkpoint', first.id],
      ['checkpoint', second.id],
      ['restore', first.id],
      ['restore', second.id],
    ]);
    // The codebase never changed, and the sandbox's changes are still all there to commit or discard.
    expect(await readdir(join(dirs.repo, 'output'))).toEqual(['.keep']);
    await cp.discard(id);
    expect(await show(id)).toBe(original);
    await cp.destroySandbox(id);
  });

  it('reviews and commits the net change of several checkpoints, as if there had been none', async () => {
    const id = await running();
    await sh(
      id,
      'cd /workspace && echo v1 > output/kept.txt && echo temp > output/temp.txt && rm src/util.py',
    );
    await cp.checkpoint(id);
    await sh(
      id,
      'cd /workspace && echo v2 > output/kept.txt && rm output/temp.txt && echo "# new" > README.md',
    );
    await cp.checkpoint(id);
    await sh(id, 'cd /workspace && mkdir -p output/deep && echo d > output/deep/f.txt');
    const changes = (await cp.changes(id)).map((c) => `${c.kind} ${c.path}`);
    expect(changes).toEqual([
      'modified /README.md',
      'added /output/deep',
      'added /output/deep/f.txt',
      'added /output/kept.txt',
      'deleted /src/util.py',
    ]);
    expect((await cp.diff(id)).diff).toContain('+v2');
    const result = await cp.commit(id);
    expect(result.conflicts).toEqual([]);
    expect(await readFile(join(dirs.repo, 'output/kept.txt'), 'utf8')).toBe('v2\n');
    expect(await readFile(join(dirs.repo, 'README.md'), 'utf8')).toBe('# new\n');
    expect(await readFile(join(dirs.repo, 'output/deep/f.txt'), 'utf8')).toBe('d\n');
    await expect(readFile(join(dirs.repo, 'output/temp.txt'))).rejects.toThrow(/ENOENT/);
    await expect(readFile(join(dirs.repo, 'src/util.py'))).rejects.toThrow(/ENOENT/);
    expect(await cp.changes(id)).toEqual([]);
    // What the sandbox sees did not change with the commit.
    expect((await cp.run(id, 'cat /workspace/output/kept.txt')).stdout).toBe('v2\n');
    await cp.destroySandbox(id);
  });

  it('shows a restore to a running shell at once, and keeps the changes since when asked', async () => {
    const id = await running();
    const session = await cp.createSession(id);
    await session.exec('cd /workspace/output && echo before > f.txt');
    const base = await cp.checkpoint(id);
    await session.exec('echo after > f.txt');
    const { kept } = await cp.restoreCheckpoint(id, base.id, { keepCurrent: true });
    expect(String((await session.exec('cat f.txt')).stdout)).toBe('before\n');
    expect(kept).toBeDefined();
    await cp.restoreCheckpoint(id, kept?.id as string);
    expect(String((await session.exec('cat f.txt')).stdout)).toBe('after\n');
    // A file written through a handle that was open when the checkpoint was taken does not change it.
    await session.exec('exec 3>>g.txt; echo one >&3');
    const held = await cp.checkpoint(id);
    await session.exec('echo two >&3; exec 3>&-');
    expect(String((await session.exec('cat g.txt')).stdout)).toBe('one\ntwo\n');
    await cp.restoreCheckpoint(id, held.id);
    expect(String((await session.exec('cat g.txt')).stdout)).toBe('one\n');
    await cp.closeSession(session.id);
    await cp.destroySandbox(id);
  });

  it('works on a stopped sandbox and survives a restart of the control plane', async () => {
    const id = await running();
    await sh(id, 'echo v1 > /workspace/output/v.txt');
    const v1 = await cp.checkpoint(id);
    await sh(id, 'echo v2 > /workspace/output/v.txt');
    await cp.stopSandbox(id);
    const v2 = await cp.checkpoint(id, { name: 'while stopped' });
    await cp.close();
    cp = await ControlPlane.open({ dataDir: dirs.dataDir });
    expect((await cp.listCheckpoints(id)).map((c) => c.id)).toEqual([v1.id, v2.id]);
    await cp.startSandbox(id);
    expect((await cp.run(id, 'cat /workspace/output/v.txt')).stdout).toBe('v2\n');
    await cp.restoreCheckpoint(id, v1.id);
    expect((await cp.run(id, 'cat /workspace/output/v.txt')).stdout).toBe('v1\n');
    await cp.destroySandbox(id);
  });

  it('removes a layer once no checkpoint or sandbox holds it, and keeps the store private', async () => {
    const layers = join(dirs.dataDir, 'layers');
    const others = new Set(await readdir(layers).catch(() => []));
    const id = await running();
    await cp.checkpoint(id);
    const before = (await readdir(layers)).length;
    await sh(id, 'echo a > /workspace/output/a.txt');
    const a = await cp.checkpoint(id);
    await sh(id, 'echo b > /workspace/output/b.txt');
    const b = await cp.checkpoint(id);
    expect((await stat(layers)).mode & 0o777).toBe(0o700);
    expect((await readdir(layers)).length).toBe(before + 2);
    // b's stack holds a's layer: deleting a keeps it, and b still restores whole.
    await cp.deleteCheckpoint(id, a.id);
    expect((await readdir(layers)).length).toBe(before + 2);
    await sh(id, 'rm /workspace/output/a.txt /workspace/output/b.txt');
    await cp.restoreCheckpoint(id, b.id);
    expect((await cp.run(id, 'cat /workspace/output/a.txt /workspace/output/b.txt')).stdout).toBe('a\nb\n');
    await expect(cp.restoreCheckpoint(id, a.id)).rejects.toThrow(/not found/);
    await cp.destroySandbox(id);
    await cp.sandboxes.trash.idle();
    // Every layer this sandbox made is gone with it.
    expect((await readdir(layers)).filter((name) => !others.has(name))).toEqual([]);
  });

  it('forks: each fork starts at the checkpoint, writes the same paths unseen by the others, and outlives its parent', async () => {
    const parent = await running();
    await sh(parent, 'echo base > /workspace/output/shared.txt && rm /workspace/README.md');
    const forks = await cp.forkSandbox(parent, { count: 10 });
    expect(forks).toHaveLength(10);
    expect(new Set(forks.map((f) => f.id)).size).toBe(10);
    expect(forks.every((f) => f.state === 'RUNNING')).toBe(true);
    // The fork point is a checkpoint of the parent; the parent goes on where it was.
    expect((await cp.listCheckpoints(parent)).map((c) => c.name)).toEqual(['fork']);
    await Promise.all(
      forks.map((f, i) =>
        sh(
          f.id,
          `cat /workspace/output/shared.txt > /dev/null && echo fork-${i} > /workspace/output/shared.txt`,
        ),
      ),
    );
    await sh(parent, 'echo parent > /workspace/output/shared.txt');
    for (const [i, f] of forks.entries()) {
      const seen = await cp.run(
        f.id,
        'cat /workspace/output/shared.txt; ls /workspace/README.md 2>&1 || true',
      );
      expect(seen.stdout).toMatch(new RegExp(`^fork-${i}\n.*No such file`));
    }
    expect((await cp.run(parent, 'cat /workspace/output/shared.txt')).stdout).toBe('parent\n');
    // A fork with rules of its own (view-only: names listed, no content read, nothing written).
    const [strict] = await cp.forkSandbox(parent, { preset: 'view-only' });
    const write = await cp.run(strict?.id as string, 'echo x > /workspace/output/shared.txt');
    expect(write.exitCode).not.toBe(0);
    expect((await cp.run(strict?.id as string, 'cat /workspace/.env')).exitCode).not.toBe(0);
    // Destroying the parent leaves every fork whole: the layers they stand on are kept.
    await cp.destroySandbox(parent);
    await cp.sandboxes.trash.idle();
    expect((await cp.run(forks[3]?.id as string, 'cat /workspace/output/shared.txt')).stdout).toBe(
      'fork-3\n',
    );
    await cp.destroySandbox(strict?.id as string);
    for (const f of forks) await cp.destroySandbox(f.id);
  });

  it('forks through the library: each fork is its own Sandbox, and the directory record goes with the last', async () => {
    const sb = await Sandbox.fromLocal(dirs.repo, { controlPlane: cp, preset: 'full-access' });
    await sb.run('echo lib > /workspace/output/lib.txt');
    const taken = await sb.checkpoint({ name: 'lib' });
    expect((await sb.checkpoints()).map((c) => c.id)).toEqual([taken.id]);
    const [fork] = await sb.fork();
    expect((await fork?.run('cat /workspace/output/lib.txt'))?.stdout).toBe('lib\n');
    await sb.destroy();
    // The fork goes on, over the record of the directory it shares.
    expect((await fork?.run('cat /workspace/output/lib.txt'))?.stdout).toBe('lib\n');
    await fork?.destroy();
    expect((await cp.listCodebases()).map((c) => c.id)).not.toContain(sb.codebaseId);
  });

  it('refuses bad input with errors that name it', async () => {
    const id = await running();
    await expect(cp.restoreCheckpoint(id, 'cp_nope')).rejects.toThrow(/invalid checkpoint id "cp_nope"/);
    await expect(cp.checkpoint(id, { name: 'x'.repeat(201) })).rejects.toThrow(
      /name must be a string of at most 200/,
    );
    await expect(cp.checkpoint('sb_x')).rejects.toThrow(/invalid sandbox id/);
    await cp.destroySandbox(id);
  });
});
