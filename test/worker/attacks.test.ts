// Attacks on the mount: deleting or moving directories with hidden children, smuggling hidden or
// read-only files into a write area, symlinks into hidden paths and out of the codebase, symlinks planted
// in the codebase or the delta around a commit, `..` and absolute names, and a rename race.
import { mkdir, readFile, readdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AGENT_SAFE, mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';
import { probe } from '../helpers/worker-probe.js';

const TREE = {
  'src/a.txt': 'a\n',
  'secrets/token.txt': 'TOKEN\n',
  '.env': 'ENV\n',
  'output/plain.txt': 'plain\n',
  'output/mixed/visible.txt': 'v\n',
  'output/mixed/.env': 'hidden env\n',
  'output/mixed/secrets/deep.txt': 'deep\n',
  'output/keys/id.key': 'key\n',
} as const;

describe.each(['sandbox', 'host'] as const)('attacks as %s', (who) => {
  useMountHygiene();

  it('a directory holding hidden entries cannot be removed; rm -rf fails and hidden content survives', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    expect(
      await probe(f[who], [
        ['listdir', 'output/mixed'],
        ['listdir', 'output/keys'],
        ['rmdir', 'output/keys'],
      ]),
    ).toEqual(['ok:visible.txt', 'ok:', 'ENOTEMPTY']);
    const rmrf = await f[who]('rm -rf output/mixed output/keys; echo "rc=$?"; ls -A output');
    expect(rmrf.stdout).toBe('rc=1\nkeys\nmixed\nplain.txt\n');
    expect(rmrf.stderr).toMatch(/Directory not empty/);
    const moved = await probe(f[who], [
      ['rename', 'output/mixed', 'output/mixed2'],
      ['rename', 'output/keys', 'output/keys2'],
    ]);
    for (const r of moved) expect(['EXDEV', 'EACCES', 'ENOTEMPTY']).toContain(r);
    const result = await f.worker.client.request('commit', { mode: 'last-writer-wins' });
    expect(result.conflicts).toEqual([]);
    expect(await readFile(join(f.lower, 'output/mixed/.env'), 'utf8')).toBe('hidden env\n');
    expect(await readFile(join(f.lower, 'output/mixed/secrets/deep.txt'), 'utf8')).toBe('deep\n');
    expect(await readFile(join(f.lower, 'output/keys/id.key'), 'utf8')).toBe('key\n');
    await expect(readFile(join(f.lower, 'output/mixed/visible.txt'))).rejects.toThrow(/ENOENT/);
  });

  it('a directory the sandbox made, holding entries hidden by a later rule, cannot be removed or moved', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    expect(
      await probe(f[who], [
        ['mkdir', 'output/made'],
        ['write', 'output/made/note.txt', 'n'],
      ]),
    ).toEqual(['ok', 'ok']);
    await f.worker.client.request('setRules', {
      rules: [...AGENT_SAFE, { pattern: '/output/made/note.txt', permission: 'none', priority: 300 }],
    });
    expect(
      await probe(f[who], [
        ['listdir', 'output/made'],
        ['rmdir', 'output/made'],
        ['rename', 'output/made', 'output/made2'],
        ['rename', 'output/made', 'src/made'],
      ]),
    ).toEqual(['ok:', 'ENOTEMPTY', 'EACCES', 'EACCES']);
    await f.worker.client.request('setRules', { rules: AGENT_SAFE });
    expect(await probe(f[who], [['read', 'output/made/note.txt']])).toEqual(['ok:n']);
  });

  it('a directory cannot be moved where its entries would land on paths the sandbox may not write', async () => {
    const rules = [
      ...AGENT_SAFE,
      { pattern: '/output/e/f.txt', permission: 'read' as const, priority: 50 },
      { pattern: '/output/h/f.txt', permission: 'none' as const, priority: 50 },
      { pattern: '/output/d/ro.txt', permission: 'read' as const, priority: 50 },
    ];
    const f = await mountFixture({ tree: TREE, rules });
    expect(
      await probe(f[who], [
        ['mkdir', 'output/d'],
        ['write', 'output/d/f.txt', 'mine'],
        ['rename', 'output/d', 'output/e'],
        ['rename', 'output/d', 'output/h'],
        ['rename', 'output/d', 'output/ok'],
        ['mkdir', 'output/d'],
        ['read', 'output/ok/f.txt'],
      ]),
    ).toEqual(['ok', 'ok', 'EACCES', 'EACCES', 'ok', 'ok', 'ok:mine']);
    // A read-only entry inside a directory the sandbox made (a rule added later) pins the directory too.
    expect(await probe(f[who], [['write', 'output/ok/ro.txt', 'x']])).toEqual(['ok']);
    await f.worker.client.request('setRules', {
      rules: [...rules, { pattern: '/output/ok/ro.txt', permission: 'read', priority: 50 }],
    });
    expect(await probe(f[who], [['rename', 'output/ok', 'output/ok2']])).toEqual(['EACCES']);
    await f.worker.client.request('commit', { mode: 'last-writer-wins' });
    const { readdir: list } = await import('node:fs/promises');
    expect((await list(join(f.lower, 'output'))).sort()).toEqual(['d', 'keys', 'mixed', 'ok', 'plain.txt']);
  });

  it('hidden and read-only files cannot be renamed or linked into a write area', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    expect(
      await probe(f[who], [
        ['rename', 'secrets/token.txt', 'output/t'],
        ['link', 'secrets/token.txt', 'output/t'],
        ['rename', '.env', 'output/env'],
        ['link', '.env', 'output/env'],
        ['rename', 'output/mixed/.env', 'output/env'],
        ['link', 'output/mixed/.env', 'output/env'],
        ['rename', 'output/keys/id.key', 'output/id'],
        ['rename', 'src/a.txt', 'output/a.txt'],
        ['link', 'src/a.txt', 'output/a.txt'],
        ['listdir', 'output'],
      ]),
    ).toEqual([
      'ENOENT',
      'ENOENT',
      'ENOENT',
      'ENOENT',
      'ENOENT',
      'ENOENT',
      'ENOENT',
      'EACCES',
      'EACCES',
      'ok:keys,mixed,plain.txt',
    ]);
  });

  it('a hard link between areas decided by different rules is EXDEV (one inode, one set of mode bits)', async () => {
    const f = await mountFixture({ tree: { ...TREE, 'tmp/t.txt': 't\n' }, rules: AGENT_SAFE });
    expect(
      await probe(f[who], [
        ['link', 'output/plain.txt', 'tmp/plain.txt'],
        ['link', 'tmp/t.txt', 'output/t.txt'],
        ['link', 'output/plain.txt', 'output/plain2.txt'],
        ['rename', 'output/plain2.txt', 'tmp/moved.txt'],
        ['read', 'tmp/moved.txt'],
      ]),
    ).toEqual(['EXDEV', 'EXDEV', 'ok', 'ok', 'ok:plain\n']);
    const ln = await f[who](
      'cp -l output/plain.txt tmp/copy.txt; echo "rc=$?"; ln output/plain.txt tmp/l 2>&1',
    );
    expect(ln.stdout).toMatch(/rc=1\n.*Invalid cross-device link/s);
  });

  it('symlinks into hidden paths resolve through the mount (ENOENT); absolute ones stay inside the sandbox', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const inner = who === 'sandbox' ? '/workspace' : f.mnt;
    const out = await probe(f[who], [
      ['symlink', 'output/l1', '../secrets/token.txt'],
      ['read', 'output/l1'],
      ['symlink', 'output/l2', `${inner}/.env`],
      ['read', 'output/l2'],
      ['symlink', 'output/l3', '../output/mixed/.env'],
      ['read', 'output/l3'],
      ['symlink', 'output/l4', '/etc/shadow'],
      ['readlink', 'output/l4'],
    ]);
    expect(out).toEqual(['ok', 'ENOENT', 'ok', 'ENOENT', 'ok', 'ENOENT', 'ok', 'ok:/etc/shadow']);
    // The worker never resolves a symlink itself: reading one through the control plane is refused.
    await expect(f.worker.client.request('readFile', { path: '/output/l4' })).rejects.toThrow(
      /EISDIR|not a regular file/,
    );
    await expect(
      f.worker.client.request('writeFile', { path: '/output/l4', data: Buffer.from('x') }),
    ).rejects.toThrow(/EISDIR|not a regular file/);
    if (who === 'sandbox') {
      // Inside the sandbox /etc/shadow is the sandbox's own (absent here), never the host's.
      const cat = await f.sandbox('cat output/l4');
      expect(cat.code).not.toBe(0);
      expect(cat.stdout).toBe('');
    }
  });

  it('.. and absolute names from the control plane cannot leave the codebase', async () => {
    const f = await mountFixture({
      tree: TREE,
      rules: [...AGENT_SAFE, { pattern: '/**', permission: 'read' }],
    });
    for (const path of ['../../etc/passwd', '/output/../secrets/token.txt', 'output/../../x', '/..']) {
      await expect(f.worker.client.request('readFile', { path })).rejects.toThrow(/\.\./);
    }
    await expect(f.worker.client.request('readFile', { path: '/etc/passwd' })).rejects.toThrow(
      /ENOENT|not exist/,
    );
    await expect(
      f.worker.client.request('writeFile', { path: '/output/../../escape.txt', data: Buffer.from('x') }),
    ).rejects.toThrow(/\.\./);
    // Inside the mount, .. at the root stays at the root.
    expect(
      await probe(f[who], [
        ['read', '../../../../output/plain.txt'.replace(/^/, who === 'sandbox' ? '' : '')],
      ]),
    ).toEqual([who === 'sandbox' ? 'ENOENT' : 'ENOENT']);
    expect(await probe(f[who], [['read', './output/../output/./plain.txt']])).toEqual(['ok:plain\n']);
  });

  it('a symlink planted in the codebase during the sandbox session makes commit refuse, never write outside', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const outside = join(f.base, 'outside');
    await mkdir(outside);
    expect(
      await probe(f[who], [
        ['write', 'output/mixed/visible.txt', 'changed'],
        ['mkdir', 'output/newdir'],
        ['write', 'output/newdir/f', 'f'],
      ]),
    ).toEqual(['ok', 'ok', 'ok']);
    // Behind the sandbox's back: output/mixed becomes a symlink to a directory outside the codebase, and
    // output/newdir is planted as one too.
    await rename(join(f.lower, 'output/mixed'), join(f.base, 'mixed-moved'));
    await symlink(outside, join(f.lower, 'output/mixed'));
    await symlink(outside, join(f.lower, 'output/newdir'));
    for (const mode of ['detect-conflicts', 'last-writer-wins'] as const) {
      const result = await f.worker.client.request('commit', { mode });
      expect(result.conflicts.map((c) => c.path).sort()).toEqual(
        expect.arrayContaining(['/output/mixed/visible.txt']),
      );
      expect(await readdir(outside)).toEqual([]);
    }
  });

  it('a symlink planted in the delta is never followed by commit, diff or the mount', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const outside = join(f.base, 'outside');
    await mkdir(outside);
    await writeFile(join(outside, 'x.txt'), 'outside\n');
    expect(
      await probe(f[who], [
        ['mkdir', 'output/d'],
        ['write', 'output/d/f.txt', 'f'],
        ['write', 'output/plain.txt', 'p'],
      ]),
    ).toEqual(['ok', 'ok', 'ok']);
    // Replace the delta's upper directory output/d with a symlink to a host directory, and the upper
    // file output/plain.txt with a symlink to a host file. The targets are relative so that they name the
    // host directory only from inside the delta (upper/output/../../../outside = <base>/outside); from
    // the mount they resolve elsewhere (<mnt>/output/../../../outside), so whoever reads the content
    // through them must be the worker following a host-side symlink.
    const upper = join(f.delta, 'upper');
    await rm(join(upper, 'output/d'), { recursive: true });
    await symlink('../../../outside', join(upper, 'output/d'));
    await rm(join(upper, 'output/plain.txt'));
    await symlink('../../../outside/x.txt', join(upper, 'output/plain.txt'));
    await f.worker.client.request('discard', { paths: ['/nothing'] }); // drops the kernel's caches
    const seen = await probe(f[who], [
      ['read', 'output/d/x.txt'],
      ['read', 'output/plain.txt'],
      ['lstat', 'output/d'],
      ['readlink', 'output/d'],
    ]);
    expect(seen).toEqual(['ENOENT', 'ENOENT', 'ok:0o120777', 'ok:../../../outside']);
    // The diff shows the symlinks as their targets' text (as git does), never what they lead to.
    const diff = await f.worker.client.request('diff', {});
    expect(diff.diff).toContain('+../../../outside/x.txt\n');
    expect(diff.diff).not.toContain('+outside');
    await f.worker.client.request('commit', { mode: 'last-writer-wins' });
    expect((await readdir(outside)).sort()).toEqual(['x.txt']);
    expect(await readFile(join(outside, 'x.txt'), 'utf8')).toBe('outside\n');
  });

  it('set-id bits stay in the delta and never reach the codebase (commit strips them and says so)', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const r = await f[who](
      'chmod 4755 output/plain.txt && printf "#!/bin/sh\\n" > output/new && chmod 6755 output/new && mkdir -m 2775 output/sgid-dir && stat -c %a output/plain.txt output/new output/sgid-dir',
    );
    expect(r.stderr).toBe('');
    // Stored and shown exactly (contract §2); the mount is nosuid, so they grant nothing inside.
    expect(r.stdout).toBe('4755\n6755\n2775\n');
    const { stat: hostStat } = await import('node:fs/promises');
    // The delta's upper tree is root-only: nobody on the host can reach a set-id file in it.
    expect((await hostStat(join(f.delta, 'upper'))).mode & 0o777).toBe(0o700);
    const result = await f.worker.client.request('commit', { mode: 'detect-conflicts' });
    expect(result.conflicts).toEqual([]);
    expect(result.changed?.map((c) => c.path).sort()).toEqual([
      '/output/new',
      '/output/plain.txt',
      '/output/sgid-dir',
    ]);
    expect(result.changed?.[0]?.reason).toMatch(/set-uid\/set-gid bits removed/);
    for (const name of ['plain.txt', 'new']) {
      expect(((await hostStat(join(f.lower, 'output', name))).mode & 0o7777).toString(8)).toBe('755');
    }
    expect(((await hostStat(join(f.lower, 'output/sgid-dir'))).mode & 0o7777).toString(8)).toBe('775');
  });

  // Bounded by time, not by a count: 300 rounds of each loop were ~4,200 processes, ~10 ms each under bwrap
  // at load 8-10, past the 50 s a fixture command may run. The reader reads for READ_SECONDS while the
  // writer renames; both counts are checked, so a run in which the two loops never overlapped fails.
  it('race: a rename loop in a write area never exposes a hidden file', async () => {
    const f = await mountFixture({ tree: TREE, rules: AGENT_SAFE });
    const READ_SECONDS = 8;
    const loop = [
      'mkdir -p output/r && echo visible > output/r/f',
      // the writer ends after a whole round (r and f back in place) once the reader is done
      '{ i=0; while [ ! -e output/stop ]; do mv output/r output/r2; mv output/r2 output/r; mv output/r/f output/r/f2; mv output/r/f2 output/r/f; i=$((i+1)); done > /dev/null 2>&1; echo $i > output/moves; } &',
      `end=$(( $(date +%s) + ${READ_SECONDS} )); leaks=0; reads=0; while [ $(date +%s) -lt $end ]; do`,
      '  for p in secrets/token.txt .env output/mixed/.env output/r/../../secrets/token.txt output/r2/../../.env; do',
      '    if cat "$p" 2>/dev/null | grep -q -e TOKEN -e ENV -e hidden; then leaks=$((leaks+1)); fi',
      '  done; reads=$((reads+5))',
      'done; touch output/stop; wait; echo "leaks=$leaks reads=$reads moves=$(cat output/moves)"; cat output/r/f',
    ].join('\n');
    const r = await f[who](loop);
    const counts = /^leaks=(\d+) reads=(\d+) moves=(\d+)\nvisible\n$/.exec(r.stdout);
    expect(counts, `${r.stdout}${r.stderr}`).not.toBeNull();
    const [leaks, reads, moves] = counts!.slice(1).map(Number);
    expect(leaks).toBe(0);
    // Each loop ran long enough to race the other: tens of rounds even at load 10.
    expect(reads).toBeGreaterThanOrEqual(25);
    expect(moves).toBeGreaterThanOrEqual(10);
  }, 120_000);
});
