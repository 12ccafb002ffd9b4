// Real tools on a real mount behave as on a normal disk: git, grep, find, tar, cp -a, rm -rf, mv, an
// editor's atomic save, and an npm-style install into a write area. Run as the sandbox user in bwrap.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { PermissionRule } from '@agentfense/protocol';
import { AGENT_SAFE, mountFixture, useMountHygiene, writeTree } from '../helpers/worker-fixture.js';

const exec = promisify(execFile);

const TREE = {
  'README.md': '# demo\nneedle in the readme\n',
  'src/a.ts': 'export const a = 1; // needle\n',
  'src/b.ts': 'export const b = 2;\n',
  'src/lib/c.ts': 'export const c = 3;\n',
  'src/bin/run.sh': { content: '#!/bin/sh\necho run\n', mode: 0o755 },
  'src/link-to-a': { symlink: 'a.ts' },
  'secrets/token.txt': 'needle secret\n',
  '.env': 'TOKEN=needle\n',
  'src/.env.local': 'X=needle\n',
  'output/keep.txt': 'old output\n',
  'output/tree/one.txt': '1\n',
  'output/tree/sub/two.txt': '2\n',
  'output/edit.txt': 'line 1\nline 2\n',
} as const;

describe('real tools on the mount (sandbox user in bwrap)', () => {
  useMountHygiene();

  it('grep -r finds visible matches only and exits 0', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox('grep -rn needle . | sort');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('./README.md:2:needle in the readme\n./src/a.ts:1:export const a = 1; // needle\n');
  });

  it('find lists exactly the visible tree, with types', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox('find . -printf "%y %p\\n" | sort');
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual([
      'd .',
      'd ./output',
      'd ./output/tree',
      'd ./output/tree/sub',
      'd ./src',
      'd ./src/bin',
      'd ./src/lib',
      'f ./README.md',
      'f ./output/edit.txt',
      'f ./output/keep.txt',
      'f ./output/tree/one.txt',
      'f ./output/tree/sub/two.txt',
      'f ./src/a.ts',
      'f ./src/b.ts',
      'f ./src/bin/run.sh',
      'f ./src/lib/c.ts',
      'l ./src/link-to-a',
    ]);
  });

  it('git status in a repository whose .git is readable', async () => {
    const rules: PermissionRule[] = [
      { pattern: '**', permission: 'read' },
      { pattern: '/src/**', permission: 'write', priority: 10 },
      { pattern: '**/secrets/**', permission: 'none', priority: 100 },
    ];
    const f = await mountFixture({ tree: {}, rules });
    await writeTree(f.lower, { 'src/a.txt': 'a\n', 'src/b.txt': 'b\n', 'docs/readme.md': 'r\n' });
    const git = (...args: string[]): Promise<unknown> =>
      exec('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { cwd: f.lower });
    await git('init', '-q');
    await git('add', '.');
    await git('commit', '-qm', 'init');
    const clean = await f.sandbox('git status --porcelain && git log --oneline | wc -l');
    expect(clean.stderr).toBe('');
    expect(clean.stdout).toBe('1\n');
    const dirty = await f.sandbox(
      'echo more >> src/a.txt && rm src/b.txt && echo new > src/c.txt && git status --porcelain',
    );
    expect(dirty.stderr).toBe('');
    expect(dirty.stdout).toBe(' M src/a.txt\n D src/b.txt\n?? src/c.txt\n');
    const diff = await f.sandbox('git diff --stat');
    expect(diff.stdout).toMatch(/2 files changed, 1 insertion\(\+\), 1 deletion\(-\)/);
    // .git itself is read-only: git cannot write into it.
    const commit = await f.sandbox('git add src/a.txt');
    expect(commit.code).not.toBe(0);
    expect(commit.stderr).toMatch(/index\.lock.*(Permission denied|Read-only)/);
  });

  it('git init/add/commit/gc inside a write area (lock files, link + unlink, renames), python -m venv', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      [
        'set -e',
        'git config --global user.name t && git config --global user.email t@t',
        'cd output && git init -q repo && cd repo',
        'for i in 1 2 3; do echo $i > f$i; done',
        'git add . && git commit -qm one',
        'echo more >> f1 && git mv f2 g2 && git commit -qam two',
        'git gc -q && git fsck --no-progress 2>&1 | grep -v "^Checking" || true',
        'git log --oneline | wc -l && git status --porcelain',
        'cd /workspace && python3 -m venv --without-pip output/venv && output/venv/bin/python -c "import sys; print(sys.prefix)"',
      ].join('\n'),
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('2\n/workspace/output/venv\n');
  });

  it('tar c of a read area, tar x into a write area, cp -a, diff -r', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      [
        'set -e',
        'tar cf - src | tar xf - -C output',
        'diff -r src output/src',
        'cp -a src output/copy',
        'diff -r src output/copy',
        'test -x output/copy/bin/run.sh',
        'test "$(readlink output/copy/link-to-a)" = a.ts',
        'stat -c "%a %Y" src/bin/run.sh output/copy/bin/run.sh',
        'tar tf - < /dev/null 2>/dev/null || true',
      ].join('\n'),
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const [orig, copy] = r.stdout.trim().split('\n');
    expect(copy).toBe(orig); // cp -a keeps mode and mtime
    expect(await readFile(`${f.lower}/src/a.ts`, 'utf8')).toBe(TREE['src/a.ts']);
  });

  it('rm -rf of a write area and mv (files and directories) work', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      [
        'set -e',
        'mkdir -p output/new/deep && echo x > output/new/deep/x.txt',
        'mv output/new output/moved',
        'mv output/keep.txt output/moved/keep.txt',
        'rm -rf output/tree',
        'find output | sort',
      ].join('\n'),
    );
    expect(r.stderr).toBe('');
    expect(r.stdout.trim().split('\n')).toEqual([
      'output',
      'output/edit.txt',
      'output/moved',
      'output/moved/deep',
      'output/moved/deep/x.txt',
      'output/moved/keep.txt',
    ]);
    // Moving a codebase directory is EXDEV: mv falls back to copy + delete, transparently.
    const mvDir = await f.sandbox(
      'mkdir output/t2 && echo 1 > output/t2/f && mv output/t2 output/t3 && ls output/t3',
    );
    expect(mvDir.stdout).toBe('f\n');
    const changes = await f.worker.client.request('changes', {});
    expect(changes.changes.filter((c) => c.kind === 'deleted').map((c) => c.path)).toEqual([
      '/output/keep.txt',
      '/output/tree',
      '/output/tree/one.txt',
      '/output/tree/sub',
      '/output/tree/sub/two.txt',
    ]);
    // The codebase is untouched until commit.
    expect(await readFile(`${f.lower}/output/tree/one.txt`, 'utf8')).toBe('1\n');
  });

  it("an editor's atomic save (temp file + fsync + rename over the original) and sed -i", async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const save = String.raw`
import os
fd = os.open('output/.edit.txt.swp', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, b'line 1\nline 2 edited\n')
os.fsync(fd)
os.close(fd)
os.chmod('output/.edit.txt.swp', 0o640)
os.rename('output/.edit.txt.swp', 'output/edit.txt')
print(open('output/edit.txt').read(), end='')
print(oct(os.stat('output/edit.txt').st_mode & 0o777))
`;
    const r = await f.sandbox(
      "python3 - && sed -i 's/line 1/LINE ONE/' output/edit.txt && cat output/edit.txt && ls -a output",
      { stdin: save },
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(
      'line 1\nline 2 edited\n0o640\nLINE ONE\nline 2 edited\n.\n..\nedit.txt\nkeep.txt\ntree\n',
    );
    const vim = await f.sandbox(
      'vim -es -u NONE -c "%s/ONE/1/" -c "wq" output/edit.txt && cat output/edit.txt',
    );
    expect(vim.stdout).toBe('LINE 1\nline 2 edited\n');
    const diff = await f.worker.client.request('diff', {});
    expect(diff.diff).toContain('-line 1\n-line 2\n+LINE 1\n+line 2 edited\n');
  });

  it('an npm-style install: cp -a and tar x of a package tree (files, dirs, symlinks, +x) into a write area', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f.sandbox(
      [
        'set -e',
        'mkdir -p output/node_modules',
        'cp -a /usr/lib/node_modules/npm output/node_modules/npm',
        'diff -r --no-dereference /usr/lib/node_modules/npm output/node_modules/npm',
        'mkdir -p output/x && tar cf - -C /usr/lib/node_modules npm | tar xf - -C output/x',
        'diff -r --no-dereference /usr/lib/node_modules/npm output/x/npm',
        'chmod +x output/x/npm/bin/npm-cli.js',
        'node output/node_modules/npm/bin/npm-cli.js --version',
        'find output/node_modules -type l | wc -l',
        'rm -rf output/x',
      ].join('\n'),
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const expectedLinks = (await exec('find', ['/usr/lib/node_modules/npm', '-type', 'l'])).stdout
      .trim()
      .split('\n').length;
    const [version, links] = r.stdout.trim().split('\n');
    expect(version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(Number(links)).toBe(expectedLinks);
  }, 180_000);
});
