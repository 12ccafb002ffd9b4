// contract §3 on a real mount: copy-up, unforgeable whiteouts, opaque directories, rename/link semantics,
// the change set and unified diff, commit (conflicts, last-writer-wins), discard, and a delta that
// survives a worker's SIGKILL.
import { lstat, readFile, readdir, writeFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { clearFuseMount } from '@agentfense/fuse-worker';
import { AGENT_SAFE, mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';

const TREE = {
  'src/a.ts': 'a\n',
  'output/keep.txt': 'keep\n',
  'output/edit.txt': 'one\ntwo\nthree\n',
  'output/gone.txt': 'gone\n',
  'output/tree/one.txt': '1\n',
  'output/tree/sub/two.txt': '2\n',
  'output/secrets/hidden.txt': 'hidden\n',
} as const;

describe('delta layer on a real mount', () => {
  useMountHygiene();

  it('copy-up and rename keep the codebase untouched and the inode number stable (stat and readdir agree)', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      [
        'set -e',
        'before=$(stat -c %i output/edit.txt)',
        'dirent=$(ls -i output | awk \'$2 == "edit.txt" { print $1 }\')',
        'echo four >> output/edit.txt',
        'after=$(stat -c %i output/edit.txt)',
        'dirent2=$(ls -i output | awk \'$2 == "edit.txt" { print $1 }\')',
        'mv output/edit.txt output/moved.txt && mv output/moved.txt output/edit.txt',
        'moved=$(stat -c %i output/edit.txt)',
        'echo "$before $dirent $after $dirent2 $moved"',
        'cat output/edit.txt',
      ].join('\n'),
    );
    expect(r.stderr).toBe('');
    const [inos, ...content] = r.stdout.trim().split('\n');
    const [before, dirent, after, dirent2, moved] = (inos ?? '').split(' ');
    expect(after).toBe(before);
    expect(moved).toBe(before); // rename keeps st_ino, as on a disk
    expect(dirent).toBe(before);
    expect(dirent2).toBe(before);
    expect(content).toEqual(['one', 'two', 'three', 'four']);
    expect(await readFile(`${f.lower}/output/edit.txt`, 'utf8')).toBe('one\ntwo\nthree\n');
  });

  it('a codebase directory keeps its inode number when the sandbox creates a file inside it', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      'stat -c %i output/tree; touch output/tree/new; stat -c %i output/tree; ls -id output/tree/sub | cut -d" " -f1; touch output/tree/sub/n; stat -c %i output/tree/sub',
    );
    expect(r.stderr).toBe('');
    const [a, b, c, d] = r.stdout.trim().split('\n');
    expect(b).toBe(a);
    expect(d).toBe(c);
  });

  it('whiteouts cannot be forged: .wh.* names are ordinary files and delete nothing on commit', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      'touch output/.wh.keep.txt output/.wh..wh..opq && mkdir output/.wh.tree && ls -A output && cat output/keep.txt',
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('.wh..wh..opq\n.wh.keep.txt\n.wh.tree\nedit.txt\ngone.txt\nkeep.txt\ntree\nkeep\n');
    const result = await f.worker.client.request('commit', { mode: 'detect-conflicts' });
    expect(result.conflicts).toEqual([]);
    expect((await readdir(`${f.lower}/output`)).sort()).toEqual([
      '.wh..wh..opq',
      '.wh.keep.txt',
      '.wh.tree',
      'edit.txt',
      'gone.txt',
      'keep.txt',
      'secrets',
      'tree',
    ]);
    expect(await readFile(`${f.lower}/output/tree/one.txt`, 'utf8')).toBe('1\n');
    // The whiteout journal lives outside the upper tree: nothing in upper/ names a deletion.
    const d = await f.sandbox('rm output/gone.txt && ls output');
    expect(d.stdout).not.toContain('gone.txt');
    expect(await readdir(`${f.delta}/upper/output`).catch(() => [])).not.toContain('.wh.gone.txt');
  });

  it('rmdir + mkdir starts an opaque, empty directory; commit removes the old content', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      'rm -rf output/tree && mkdir output/tree && ls -A output/tree && echo new > output/tree/n.txt && ls output/tree',
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('n.txt\n');
    const changes = await f.worker.client.request('changes', {});
    expect(changes.changes.map((c) => `${c.kind} ${c.path}`)).toEqual([
      'modified /output/tree',
      'added /output/tree/n.txt',
      'deleted /output/tree/one.txt',
      'deleted /output/tree/sub',
      'deleted /output/tree/sub/two.txt',
    ]);
    const result = await f.worker.client.request('commit', { mode: 'detect-conflicts' });
    expect(result.conflicts).toEqual([]);
    expect((await readdir(`${f.lower}/output/tree`)).sort()).toEqual(['n.txt']);
  });

  it('rename of a codebase file and hard links inside a write area', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      [
        'set -e',
        'mv output/keep.txt output/kept.txt',
        'ln output/edit.txt output/edit-link.txt',
        'echo four >> output/edit-link.txt',
        'cat output/edit.txt',
        'stat -c "%h %i" output/edit.txt output/edit-link.txt',
        'ls output',
      ].join('\n'),
    );
    expect(r.stderr).toBe('');
    const lines = r.stdout.trim().split('\n');
    expect(lines.slice(0, 4)).toEqual(['one', 'two', 'three', 'four']);
    expect(lines[4]).toBe(lines[5]);
    expect(lines[4]?.startsWith('2 ')).toBe(true);
    expect(lines.slice(6)).toEqual(['edit-link.txt', 'edit.txt', 'gone.txt', 'kept.txt', 'tree']);
    expect((await lstat(`${f.lower}/output/edit.txt`)).nlink).toBe(1);
    const result = await f.worker.client.request('commit', { mode: 'detect-conflicts' });
    expect(result.conflicts).toEqual([]);
    expect(await readFile(`${f.lower}/output/kept.txt`, 'utf8')).toBe('keep\n');
    expect(await readFile(`${f.lower}/output/edit-link.txt`, 'utf8')).toBe('one\ntwo\nthree\nfour\n');
    await expect(lstat(`${f.lower}/output/keep.txt`)).rejects.toThrow(/ENOENT/);
  });

  it('change set and unified diff', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      "sed -i 's/two/TWO/' output/edit.txt && rm output/gone.txt && printf 'x\\0y' > output/bin && echo hi > output/new.txt && mkdir output/d",
    );
    expect(r.stderr).toBe('');
    const { changes } = await f.worker.client.request('changes', {});
    expect(changes).toEqual([
      { path: '/output/bin', kind: 'added', type: 'file', size: 3, mode: 0o644 },
      { path: '/output/d', kind: 'added', type: 'directory', size: null, mode: 0o755 },
      { path: '/output/edit.txt', kind: 'modified', type: 'file', size: 14, mode: 0o644, oldMode: 0o644 },
      { path: '/output/gone.txt', kind: 'deleted', type: 'file', size: null },
      { path: '/output/new.txt', kind: 'added', type: 'file', size: 3, mode: 0o644 },
    ]);
    const diff = await f.worker.client.request('diff', {});
    expect(diff.binary).toEqual(['/output/bin']);
    expect(diff.diff).toContain(
      '--- a/output/edit.txt\n+++ b/output/edit.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n',
    );
    expect(diff.diff).toContain('--- a/output/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n');
    expect(diff.diff).toContain('--- /dev/null\n+++ b/output/new.txt\n@@ -0,0 +1 @@\n+hi\n');
  });

  it('commit detects a codebase change behind the sandbox, keeps it, and last-writer-wins overrides', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    await f.sandbox('echo sandbox > output/keep.txt && echo added > output/added.txt');
    await writeFile(`${f.lower}/output/keep.txt`, 'changed behind the sandbox\n');
    const first = await f.worker.client.request('commit', { mode: 'detect-conflicts' });
    expect(first.conflicts.map((c) => c.path)).toEqual(['/output/keep.txt']);
    expect(first.applied.map((c) => c.path)).toEqual(['/output/added.txt']);
    expect(await readFile(`${f.lower}/output/keep.txt`, 'utf8')).toBe('changed behind the sandbox\n');
    expect(await readFile(`${f.lower}/output/added.txt`, 'utf8')).toBe('added\n');
    const still = await f.worker.client.request('changes', {});
    expect(still.changes.map((c) => c.path)).toEqual(['/output/keep.txt']);
    const lww = await f.worker.client.request('commit', { mode: 'last-writer-wins' });
    expect(lww.conflicts).toEqual([]);
    expect(await readFile(`${f.lower}/output/keep.txt`, 'utf8')).toBe('sandbox\n');
    expect((await f.worker.client.request('changes', {})).changes).toEqual([]);
    // The mount still shows the (now committed) content.
    expect((await f.sandbox('cat output/keep.txt output/added.txt')).stdout).toBe('sandbox\nadded\n');
  });

  it('discard empties the delta and the mount shows the codebase again at once', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const before = await f.sandbox(
      'cat output/edit.txt; echo changed > output/edit.txt; rm output/gone.txt; touch output/n; cat output/edit.txt; ls output',
    );
    expect(before.stdout).toBe('one\ntwo\nthree\nchanged\nedit.txt\nkeep.txt\nn\ntree\n');
    await f.worker.client.request('discard', {});
    expect((await f.worker.client.request('changes', {})).changes).toEqual([]);
    const after = await f.sandbox('cat output/edit.txt; ls output');
    expect(after.stdout).toBe('one\ntwo\nthree\nedit.txt\ngone.txt\nkeep.txt\ntree\n');
  });

  it("sandboxes on one codebase never see each other's deltas; a commit reaches the other within its cache TTL", async () => {
    const a = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const b = await mountFixture({ rules: AGENT_SAFE, lowerDir: a.lower, cacheTtlSeconds: 1 });
    expect((await b.sandbox('cat output/keep.txt')).stdout).toBe('keep\n');
    await a.sandbox('echo from-a > output/keep.txt && echo new > output/a-only.txt && rm output/gone.txt');
    expect((await b.sandbox('cat output/keep.txt; ls output')).stdout).toBe(
      'keep\nedit.txt\ngone.txt\nkeep.txt\ntree\n',
    );
    expect((await a.worker.client.request('commit', { mode: 'detect-conflicts' })).conflicts).toEqual([]);
    // b read keep.txt before: its worker held the old codebase inode open and the kernel its pages. Once
    // the attributes expire, the changed identity drops both.
    const deadline = Date.now() + 10_000;
    let seen = '';
    while (Date.now() < deadline) {
      seen = (await b.sandbox('cat output/keep.txt; ls output')).stdout;
      if (seen.startsWith('from-a')) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(seen).toBe('from-a\na-only.txt\nedit.txt\nkeep.txt\ntree\n');
  });

  it('the delta survives a worker SIGKILL: a new worker on the same deltaDir shows the same view', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const script = [
      'set -e',
      'echo changed >> output/edit.txt',
      'rm output/gone.txt',
      'rm -rf output/tree && mkdir output/tree && echo n > output/tree/n.txt',
      'mv output/keep.txt output/kept.txt',
      'ln -s kept.txt output/l',
      'mkfifo output/fifo',
    ].join('\n');
    expect((await f.sandbox(script)).stderr).toBe('');
    const view = 'find output -printf "%y %p %s\\n" | sort; cat output/edit.txt output/tree/n.txt';
    const seen = await f.sandbox(view);
    const changes = await f.worker.client.request('changes', {});
    process.kill(f.worker.pid, 'SIGKILL');
    await f.worker.exited;
    await clearFuseMount(f.mnt);
    await f.stop();
    const g = await mountFixture({ rules: AGENT_SAFE, lowerDir: f.lower, deltaDir: f.delta });
    const again = await g.sandbox(view);
    expect(again.stdout).toBe(seen.stdout);
    expect((await g.worker.client.request('changes', {})).changes).toEqual(changes.changes);
    const result = await g.worker.client.request('commit', { mode: 'detect-conflicts' });
    expect(result.conflicts).toEqual([]);
    expect((await readdir(`${f.lower}/output`)).sort()).toEqual([
      'edit.txt',
      'kept.txt',
      'l',
      'secrets',
      'tree',
    ]);
    expect(await readFile(`${f.lower}/output/secrets/hidden.txt`, 'utf8')).toBe('hidden\n');
  });
});
