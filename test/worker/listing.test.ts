// Directory listings on a real mount: large directories (several readdir pages) filtered by the rules
// and merged with the delta, directories kept traversable by an exception, and names that need care.
import { mkdir, truncate, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { PermissionRule } from '@agentfense/protocol';
import { AGENT_SAFE, mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';
import { probe } from '../helpers/worker-probe.js';

describe('listings', () => {
  useMountHygiene();

  it('a 3000-entry directory lists completely across readdir pages, filtered and merged with the delta', async () => {
    const f = await mountFixture({ tree: {}, rules: AGENT_SAFE });
    await mkdir(join(f.lower, 'output/big'), { recursive: true });
    for (let i = 0; i < 3000; i++) {
      await writeFile(
        join(
          f.lower,
          'output/big',
          `file-with-a-longish-name-${String(i).padStart(5, '0')}${i % 10 === 0 ? '.key' : '.txt'}`,
        ),
        '',
      );
    }
    const r = await f.sandbox(
      [
        'set -e',
        'ls output/big | wc -l',
        'ls output/big | grep -c "\\.key$" || true',
        'rm output/big/file-with-a-longish-name-00001.txt',
        'for i in 1 2 3 4 5; do touch output/big/new-$i; done',
        'ls output/big | wc -l',
        'ls -f output/big | sort | uniq -d | wc -l',
        'ls output/big | grep -c "^new-"',
      ].join('\n'),
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('2700\n0\n2704\n0\n5\n');
  }, 120_000);

  it('a hidden directory kept traversable by an exception shows only the exception and cannot be removed', async () => {
    const rules: PermissionRule[] = [
      ...AGENT_SAFE,
      { pattern: '/secrets/public.key', permission: 'read', priority: 200 },
      { pattern: '/output/secrets/shared.txt', permission: 'write', priority: 200 },
    ];
    const f = await mountFixture({
      tree: {
        'secrets/public.key': 'pub\n',
        'secrets/private.key': 'priv\n',
        'secrets/token.txt': 'token\n',
        'output/secrets/shared.txt': 'shared\n',
        'output/secrets/hidden.txt': 'hidden\n',
      },
      rules,
    });
    for (const who of ['sandbox', 'host'] as const) {
      expect(
        await probe(f[who], [
          ['listdir', '.'],
          ['listdir', 'secrets'],
          ['read', 'secrets/public.key'],
          ['read', 'secrets/private.key'],
          ['read', 'secrets/token.txt'],
          ['rmdir', 'secrets'],
          ['rename', 'secrets', 'output/s'],
          ['unlink', 'secrets/public.key'],
          ['listdir', 'output/secrets'],
          ['write', 'output/secrets/shared.txt', 'changed'],
          ['rename', 'output/secrets', 'output/s2'],
          ['unlink', 'output/secrets/hidden.txt'],
          ['rmdir', 'output/secrets'],
        ]),
      ).toEqual([
        'ok:output,secrets',
        'ok:public.key',
        'ok:pub\n',
        'ENOENT',
        'ENOENT',
        'EACCES',
        'EACCES',
        'EACCES',
        'ok:shared.txt',
        'ok',
        expect.stringMatching(/^(EACCES|ENOENT|EXDEV)$/),
        'ENOENT',
        expect.stringMatching(/^(EACCES|ENOENT|ENOTEMPTY)$/),
      ]);
    }
    const rmrf = await f.sandbox('rm -rf output/secrets; echo "rc=$?"; ls -A output/secrets');
    expect(rmrf.stdout).toBe('rc=1\n');
    await f.worker.client.request('commit', { mode: 'last-writer-wins' });
    const { readFile } = await import('node:fs/promises');
    expect(await readFile(join(f.lower, 'output/secrets/hidden.txt'), 'utf8')).toBe('hidden\n');
    expect(await readFile(join(f.lower, 'secrets/private.key'), 'utf8')).toBe('priv\n');
  });

  it('UTF-8 names with spaces, newlines and non-Latin scripts work; other bytes are EINVAL', async () => {
    const f = await mountFixture({ tree: { 'output/ünïcødé 名前.txt': 'u\n' }, rules: AGENT_SAFE });
    const script = String.raw`
import os
names = ['a b', 'new\nline', 'ünï', '日本語', 'x' * 255]
for n in names:
    with open('output/' + n, 'w') as fh: fh.write(n[:3])
print(sorted(os.listdir('output')) == sorted(names + ['ünïcødé 名前.txt']))
print(open('output/ünïcødé 名前.txt').read(), end='')
try:
    open(b'output/\xff\xfe', 'w')
except OSError as e:
    print(e.errno)
`;
    const r = await f.sandbox('python3 -', { stdin: script });
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('True\nu\n22\n');
    const { changes } = await f.worker.client.request('changes', {});
    expect(changes.map((c) => c.path)).toContain('/output/new\nline');
  });

  it('READDIRPLUS: a cold ls -l needs no LOOKUP, lists only visible entries, with the attributes LOOKUP gives', async () => {
    const tree: Record<string, string> = {};
    for (let i = 0; i < 40; i++) tree[`src/f${String(i).padStart(2, '0')}.txt`] = 'x'.repeat(i);
    tree['src/.env'] = 'SECRET=1\n';
    tree['src/k.key'] = 'key\n';
    tree['docs/a.md'] = 'doc\n';
    tree['output/w.txt'] = 'w\n';
    // sorted names, octal modes, sizes, owners, mtimes; then every field `stat` shows (the worker packs
    // the reply's bytes itself: direntplus-pack.ts)
    const listing =
      'for d in src docs output; do ls -ln --time-style=+%s.%N $d; done; ' +
      "stat -c '%n %s %b %B %x %y %z %h %f %u %g %i %t %T' src/* docs/* output/*";
    const a = await mountFixture({ tree, rules: AGENT_SAFE });
    // a size above 2^32 and times before 1970 and after 2038 cross the reply's 64-bit fields exactly
    await writeFile(join(a.lower, 'src/huge.bin'), '');
    await truncate(join(a.lower, 'src/huge.bin'), 5 * 2 ** 30 + 7);
    await utimes(join(a.lower, 'src/f01.txt'), -300_000_000.25, 4_200_000_000.5);
    const { fuse } = await a.worker.client.request('stats', {});
    expect(fuse?.features.readdirplus).toBe(true);
    const before = (await a.worker.client.request('stats', {})).ops;
    const plus = await a.sandbox(listing);
    const after = (await a.worker.client.request('stats', {})).ops;
    const count = (ops: typeof before, op: string): number => ops[op]?.count ?? 0;
    expect(plus.stderr).toBe('');
    expect(count(after, 'readdirplus') - count(before, 'readdirplus')).toBeGreaterThan(0);
    // the three directories themselves are looked up; no file is
    expect(count(after, 'lookup') - count(before, 'lookup')).toBeLessThanOrEqual(3);
    expect(plus.stdout).not.toMatch(/\.env|\.key/);
    expect(plus.stdout).toMatch(/^-r--r--r-- .* f39\.txt$/m);
    expect(plus.stdout).toMatch(/^---------- .* a\.md$/m);
    expect(plus.stdout).toMatch(/^-rw-r--r-- .* w\.txt$/m);

    // The same listing through one LOOKUP per name (READDIRPLUS switched off) is identical.
    process.env.AGENTFENSE_FUSE_DISABLE = 'readdirplus';
    let b;
    try {
      b = await mountFixture({ rules: AGENT_SAFE, lowerDir: a.lower });
    } finally {
      delete process.env.AGENTFENSE_FUSE_DISABLE;
    }
    expect((await b.worker.client.request('stats', {})).fuse?.features.readdirplus).toBe(false);
    const plain = await b.sandbox(listing);
    expect(plain.stdout).toBe(plus.stdout);
    expect((await b.worker.client.request('stats', {})).ops.lookup?.count ?? 0).toBeGreaterThan(40);
  });
  it('READDIRPLUS after READs: the listing handed again says what the first did, and never hides a change made through the mount', async () => {
    const tree: Record<string, string> = {};
    for (let i = 0; i < 20; i++) tree[`output/f${String(i).padStart(2, '0')}.txt`] = 'x'.repeat(i + 1);
    tree['output/.env'] = 'SECRET=1\n';
    const f = await mountFixture({ tree, rules: AGENT_SAFE });
    const ls = 'ls -ln --time-style=+%s.%N output';
    const replays = async (): Promise<number> =>
      (await f.worker.client.request('stats', {})).ops['listing-replay']?.count ?? 0;
    // 1st listing; READs make the kernel drop it; the 2nd is the same answer handed again
    const first = await f.sandbox(`${ls}; cat output/f0*.txt > /dev/null; echo ==; ${ls}`);
    expect(first.stderr).toBe('');
    const [a, b] = first.stdout.split('==\n');
    expect(b).toBe(a);
    expect(a).toMatch(/^-rw-r--r-- .* 20 [0-9.]+ f19\.txt$/m);
    expect(a).not.toMatch(/\.env/);
    expect(await replays()).toBeGreaterThan(0);
    const before = await replays();
    // A write, a truncate and a new file through the mount, each followed by READs of two files not read
    // yet (their pages are not cached), which drop the listing again: the next listing shows the new
    // sizes and names, not the remembered ones.
    const changed = await f.sandbox(
      [
        'echo more >> output/f00.txt',
        'cat output/f10.txt output/f14.txt > /dev/null',
        `${ls} | grep -E ' f00\\.txt$'`,
        'truncate -s 3 output/f01.txt',
        'cat output/f11.txt output/f15.txt > /dev/null',
        `${ls} | grep -E ' f01\\.txt$'`,
        'echo new > output/g.txt',
        'cat output/f12.txt output/f16.txt > /dev/null',
        `${ls} | grep -c 'txt$'`,
      ].join('\n'),
    );
    expect(changed.stderr).toBe('');
    expect(changed.stdout).toMatch(
      /^-rw-r--r-- .* 6 [0-9.]+ f00\.txt\n-rw-r--r-- .* 3 [0-9.]+ f01\.txt\n21\n$/,
    );
    expect(await replays()).toBe(before);
    // Rules changed: nothing remembered is handed out again (the kernel forgot everything anyway).
    await f.worker.client.request('setRules', {
      rules: [...AGENT_SAFE, { pattern: '/output/f05.txt', permission: 'none', priority: 300 }],
    });
    const hidden = await f.sandbox(`cat output/f13.txt > /dev/null; ${ls} | grep -c f05 || true`);
    expect(hidden.stdout).toBe('0\n');
  });

  it('one file READ keeps the listing (that file costs one GETATTR at the next stat); a second drops it', async () => {
    const tree: Record<string, string> = {};
    // over 64 KiB each: never stored ahead, so each one read is a READ
    for (let i = 0; i < 10; i++) tree[`src/f${i}.txt`] = `${i}\n`.repeat(40_000);
    const f = await mountFixture({ tree, rules: AGENT_SAFE });
    const ops = async (): Promise<Record<string, number>> => {
      const all = (await f.worker.client.request('stats', {})).ops;
      return Object.fromEntries(Object.entries(all).map(([k, v]) => [k, v.count]));
    };
    const ls = 'ls -ln --time-style=+%s.%N src';
    const first = await f.sandbox(`${ls} >/dev/null; cat src/f3.txt >/dev/null`);
    expect(first.stderr).toBe('');
    const a = await ops();
    // the READ made f3's atime stale: its stat asks again, the listing is still the kernel's
    expect((await f.sandbox(`${ls} >/dev/null`)).stderr).toBe('');
    const b = await ops();
    expect((b.readdirplus ?? 0) - (a.readdirplus ?? 0)).toBe(0);
    expect((b.getattr ?? 0) - (a.getattr ?? 0)).toBe(1);
    // two more files READ: the listing is dropped, and the next one refreshes every entry at once
    expect((await f.sandbox('cat src/f4.txt src/f5.txt >/dev/null')).stderr).toBe('');
    const c = await ops();
    expect((await f.sandbox(`${ls} >/dev/null`)).stderr).toBe('');
    const d = await ops();
    expect((d.readdirplus ?? 0) - (c.readdirplus ?? 0)).toBeGreaterThan(0);
    expect((d.getattr ?? 0) - (c.getattr ?? 0)).toBeLessThanOrEqual(1); // the directory's own, at most
  });
});
