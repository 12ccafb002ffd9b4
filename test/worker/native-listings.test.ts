// READDIRPLUS and READDIR of directories only the sandbox made are answered by the binding in C
// (nativeListings, docs/decisions.md, "Listings of the sandbox's own directories are answered in the
// binding"). What a user checks: `find` over a tree made there sends next to no listing to the worker, and
// what it shows (names, types, inode numbers, attributes) is what the worker shows without it; a listing
// spread over several requests is whole and in order; `rm -rf` after `find` works; after the kernel drops
// its caches a new listing and stat of everything still work; the audit of allowed accesses keeps every
// listing the worker's; the switch turns it off. The attacks are in test/security/native-listings.test.ts.
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, withEnv, type MountedFixture } from '../helpers/worker-fixture.js';
import { WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const OPEN = WRITABLE_OUTPUT;

async function counts(f: MountedFixture): Promise<{ native: number; worker: number }> {
  const { ops } = await f.worker.client.request('stats', {});
  return {
    native: ops['readdirplus-native']?.count ?? 0,
    worker: (ops.readdirplus?.count ?? 0) + (ops.readdir?.count ?? 0),
  };
}

/**
 * 3 directories of 30 files, a symlink and a subdirectory with a file, made with creates the binding
 * answers (a `test -e` miss marks each directory first, as tar's LOOKUP before each create does).
 */
const MAKE = [
  'mkdir -p output/t && test -e output/t/x',
  'for d in a b c; do mkdir output/t/$d && test -e output/t/$d/x; for i in $(seq 30); do ' +
    'echo $d$i > output/t/$d/f$i; done; mkdir output/t/$d/sub; test -e output/t/$d/sub/x; ' +
    'echo s > output/t/$d/sub/g; ln -s f1 output/t/$d/link; done',
].join('\n');

/** What the sandbox sees: each entry's name, type, mode, links, size, owner and inode number. */
const SEEN = 'find output/t -printf "%p %y %m %n %s %U:%G %i\\n" | sort';

/** The same of the writable layer (without owners: the worker shows the sandbox's), where the worker
 * takes inode numbers from. */
function hostSeen(f: MountedFixture): Promise<string> {
  return f
    .host(`cd ${f.delta}/upper && find output/t -printf "%p %y %m %n %s %i\\n" | sort`)
    .then((r) => r.stdout);
}

function withoutOwners(seen: string): string {
  return seen.replace(/ \d+:\d+ /g, ' ');
}

/** Without the inode numbers (each mount has its own writable layer). */
function withoutInos(seen: string): string {
  return seen.replace(/ \d+$/gm, '');
}

describe('listings answered in the binding', () => {
  useMountHygiene();

  it('find over a tree made there leaves the worker alone and shows what the worker shows', async () => {
    const seen: string[] = [];
    for (const disable of ['', 'nativeListings']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: OPEN, warmupEntries: 0 }),
      );
      const stats = await f.worker.client.request('stats', {});
      expect(stats.fuse?.features.nativeListings).toBe(disable === '');
      expect(await f.sandbox(MAKE)).toMatchObject({ code: 0, stderr: '' });
      const before = await counts(f);
      const r = await f.sandbox(SEEN);
      expect(r).toMatchObject({ code: 0, stderr: '' });
      const after = await counts(f);
      if (disable === '') {
        expect(after.native - before.native).toBeGreaterThanOrEqual(4);
        expect(after.worker - before.worker).toBe(0);
      } else {
        expect(after.native).toBe(0);
      }
      // the inode numbers and attributes are the writable layer's, as the worker shows them
      expect(withoutOwners(r.stdout)).toBe(await hostSeen(f));
      seen.push(withoutInos(r.stdout));
      await f.stop();
    }
    // output/t, then per directory: itself, 30 files, the link, sub and its file
    expect(seen[0]!.split('\n')).toHaveLength(1 + 3 * 34 + 1);
    expect(seen[0]).toContain('output/t/a/link l ');
    expect(seen[1]).toBe(seen[0]);
  }, 120_000);

  it('a listing spread over many requests is whole, in the worker’s order, with the worker’s offsets', async () => {
    const seen: string[] = [];
    const long = 'n'.repeat(40);
    for (const disable of ['', 'nativeListings']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: OPEN, warmupEntries: 0 }),
      );
      const r = await f.sandbox(
        [
          'mkdir output/l && cd output/l; test -e x',
          `for i in $(seq 600); do : > ${long}$i; done; mkdir d; test -e d/x`,
          // the directory's order as listed (ls -f), then names, types, modes and sizes
          'ls -f | md5sum; ls -f | wc -l',
          'find . -printf "%f %y %m %s\n" | sort | md5sum',
        ].join('\n'),
      );
      expect(r).toMatchObject({ code: 0, stderr: '' });
      const c = await counts(f);
      if (disable === '') {
        // ~600 entries of ~200 bytes: several requests, all answered in C
        expect(c.native).toBeGreaterThan(4);
        expect(c.worker).toBe(0);
      } else expect(c.native).toBe(0);
      seen.push(r.stdout);
      await f.stop();
    }
    expect(seen[0]).toContain('\n603\n');
    expect(seen[1]).toBe(seen[0]);
  }, 120_000);

  it('rm -rf after find, and a new find after the kernel dropped its caches, see a whole tree', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN, warmupEntries: 0 });
    expect(await f.sandbox(MAKE)).toMatchObject({ code: 0, stderr: '' });
    const first = await f.sandbox(SEEN);
    // the kernel forgets every node it can (FORGET) and its dentries: nothing listed in C was counted
    await f.host('sync; echo 2 > /proc/sys/vm/drop_caches');
    const again = await f.sandbox(`${SEEN}; cat output/t/*/f7 | tr "\\n" " "`);
    expect(again).toMatchObject({ code: 0, stderr: '' });
    expect(again.stdout).toBe(`${first.stdout}a7 b7 c7 `);
    const rm = await f.sandbox(
      'rm -rf output/t/a && find output/t/b > /dev/null && rm -rf output/t && ls -A output',
    );
    expect(rm).toMatchObject({ code: 0, stdout: '', stderr: '' });
    expect((await f.host(`ls -A ${f.delta}/upper/output`)).stdout).toBe('');
    expect((await counts(f)).native).toBeGreaterThan(8);
  }, 120_000);

  it('while the audit records allowed accesses, every listing is the worker’s', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN, auditAllowed: true });
    expect(await f.sandbox(MAKE)).toMatchObject({ code: 0, stderr: '' });
    expect(await f.sandbox('find output/t | wc -l')).toMatchObject({ code: 0, stdout: '103\n' });
    const c = await counts(f);
    expect(c.native).toBe(0);
    expect(c.worker).toBeGreaterThan(8);
  }, 60_000);
});
