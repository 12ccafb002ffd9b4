// The change set and the unified diff.
import { chmod, readlink, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { unifiedDiff } from '../../src/delta/unified-diff.js';
import { fixture, write } from './fixture.js';

describe('Delta changes and diff', () => {
  it('lists added / modified / deleted with sizes; an add removed again is no change', async () => {
    const f = await fixture({ keep: 'k', 'mod.txt': 'm', 'del.txt': 'd', 'dir/x': 'x' });
    await write(f.delta, '/mod.txt', 'modified');
    await f.delta.unlink('/del.txt');
    await write(f.delta, '/dir/new', 'nn');
    await f.delta.symlink('target', '/link');
    await write(f.delta, '/tmp', 't');
    await f.delta.unlink('/tmp');
    expect(await f.delta.changes()).toEqual([
      { path: '/del.txt', kind: 'deleted', type: 'file', size: null },
      { path: '/dir/new', kind: 'added', type: 'file', size: 2, mode: 0o644 },
      { path: '/link', kind: 'added', type: 'symlink', size: 6, target: 'target' },
      { path: '/mod.txt', kind: 'modified', type: 'file', size: 8, mode: 0o644, oldMode: 0o644 },
    ]);
    expect(await f.delta.changes({ paths: ['/dir'] })).toHaveLength(1);
  });

  it('produces an exact unified diff for a small edit, adds and deletes', async () => {
    const f = await fixture({
      'src/a.txt': 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n',
      'gone.txt': 'bye\n',
      'bin.dat': 'a\0b',
    });
    await write(f.delta, '/src/a.txt', 'one\ntwo\nthree\nFOUR\nfive\nsix\nseven\neight\n');
    await f.delta.unlink('/gone.txt');
    await write(f.delta, '/new.txt', 'hello');
    await write(f.delta, '/bin.dat', 'c\0d');
    const { diff, binary } = await f.delta.diff();
    expect(binary).toEqual(['/bin.dat']);
    expect(diff).toBe(
      [
        '--- a/gone.txt',
        '+++ /dev/null',
        '@@ -1 +0,0 @@',
        '-bye',
        '--- /dev/null',
        '+++ b/new.txt',
        '@@ -0,0 +1 @@',
        '+hello',
        '\\ No newline at end of file',
        '--- a/src/a.txt',
        '+++ b/src/a.txt',
        '@@ -1,7 +1,7 @@',
        ' one',
        ' two',
        ' three',
        '-four',
        '+FOUR',
        ' five',
        ' six',
        ' seven',
        '',
      ].join('\n'),
    );
    expect((await f.delta.diff({ paths: ['/src'] })).diff).toContain('+FOUR');
    expect((await f.delta.diff({ paths: ['/src'] })).diff).not.toContain('gone');
  });
});

describe('what a commit does besides content', () => {
  it('lists mode changes, new modes and symlink targets, shows them as git headers, and commits them', async () => {
    const f = await fixture({ 'run.sh': 'echo\n', 'd/x': 'x', ln: '' });
    await chmod(join(f.lower, 'run.sh'), 0o644);
    await chmod(join(f.lower, 'd'), 0o755);
    await f.delta.unlink('/ln');
    await f.delta.setattr('/run.sh', { mode: 0o666 });
    await f.delta.setattr('/d', { mode: 0o777 });
    await write(f.delta, '/new.sh', 'x\n', 0o4755);
    await f.delta.symlink('run.sh', '/ln2');
    expect(await f.delta.changes()).toEqual([
      { path: '/d', kind: 'modified', type: 'directory', size: null, mode: 0o777, oldMode: 0o755 },
      { path: '/ln', kind: 'deleted', type: 'file', size: null },
      { path: '/ln2', kind: 'added', type: 'symlink', size: 6, target: 'run.sh' },
      // Set-id bits are never committed, so never listed as what a commit writes.
      { path: '/new.sh', kind: 'added', type: 'file', size: 2, mode: 0o755 },
      { path: '/run.sh', kind: 'modified', type: 'file', size: 5, mode: 0o666, oldMode: 0o644 },
    ]);
    const { diff } = await f.delta.diff();
    expect(diff).toContain('diff --git a/d b/d\nold mode 040755\nnew mode 040777\n');
    expect(diff).toContain('diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100666\n');
    expect(diff).toContain(
      'diff --git a/new.sh b/new.sh\nnew file mode 100755\n--- /dev/null\n+++ b/new.sh\n',
    );
    expect(diff).toContain(
      'diff --git a/ln2 b/ln2\nnew file mode 120000\n--- /dev/null\n+++ b/ln2\n@@ -0,0 +1 @@\n+run.sh\n\\ No newline at end of file\n',
    );
    await f.delta.commit({ mode: 'detect-conflicts' });
    expect((await stat(join(f.lower, 'run.sh'))).mode & 0o7777).toBe(0o666);
    expect((await stat(join(f.lower, 'd'))).mode & 0o7777).toBe(0o777);
    expect((await stat(join(f.lower, 'new.sh'))).mode & 0o7777).toBe(0o755);
    expect(await readlink(join(f.lower, 'ln2'))).toBe('run.sh');
  });
});

describe('unifiedDiff', () => {
  it('splits distant changes into hunks and merges close ones', () => {
    const old = Array.from({ length: 20 }, (_, i) => `l${i + 1}\n`).join('');
    const next = old.replace('l2\n', 'L2\n').replace('l18\n', 'L18\n');
    expect(unifiedDiff({ oldText: old, newText: next, oldName: 'a/f', newName: 'b/f' })).toBe(
      '--- a/f\n+++ b/f\n@@ -1,5 +1,5 @@\n l1\n-l2\n+L2\n l3\n l4\n l5\n@@ -15,6 +15,6 @@\n l15\n l16\n l17\n-l18\n+L18\n l19\n l20\n',
    );
    const close = old.replace('l2\n', 'L2\n').replace('l8\n', 'L8\n');
    expect(unifiedDiff({ oldText: old, newText: close, oldName: 'a/f', newName: 'b/f' })).toContain(
      '@@ -1,11 +1,11 @@',
    );
    expect(unifiedDiff({ oldText: 'x\n', newText: 'x\n', oldName: 'a', newName: 'b' })).toBe('');
  });

  it('marks a missing final newline', () => {
    expect(unifiedDiff({ oldText: 'a\nb', newText: 'a\nb\n', oldName: 'a/f', newName: 'b/f' })).toBe(
      '--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n',
    );
  });

  it('handles insertions and deletions in the middle', () => {
    const d = unifiedDiff({
      oldText: 'a\nb\nc\nd\n',
      newText: 'a\nc\nx\nd\n',
      oldName: 'a/f',
      newName: 'b/f',
    });
    expect(d).toBe('--- a/f\n+++ b/f\n@@ -1,4 +1,4 @@\n a\n-b\n c\n+x\n d\n');
  });
});
