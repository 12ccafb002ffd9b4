// GETATTRs of directories only the sandbox made are answered by the binding in C (nativeDirAttrs,
// docs/decisions.md, "GETATTRs of the sandbox's own directories are answered in the binding"). What a user
// checks: `stat` of every directory of a tree made in a fresh directory prints the same with and without
// it (mode, set-gid bit, link count, owner, size, blocks, inode number, times as the host holds them), and
// the GETATTRs that each create in a directory costs (the kernel drops its attributes) leave the worker.
// The attacks are in test/security/native-dir-attrs.test.ts.
import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, withEnv } from '../helpers/worker-fixture.js';
import { nativeCount, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const WRITE_OUTPUT = WRITABLE_OUTPUT;

const opCount = nativeCount;

/**
 * Makes output/t with subdirectories of different modes (one set-gid, one read-only), files and nested
 * directories in them, fixed times on every directory; then a create in each directory (the kernel drops
 * its attributes) and `stat --cached=never` (statx with AT_STATX_FORCE_SYNC: a GETATTR for sure) of each.
 */
const MAKE = `
set -e
mkdir -p output/t
cd output/t
for d in a b c g r; do
  mkdir $d
  for i in $(seq 20); do echo $d$i > $d/f$i; done
  mkdir $d/sub1 $d/sub2
  touch $d/sub1/x
done
chmod 0755 a b
chmod 2775 g
chmod 0555 r/sub2
chmod 0700 c
for d in a b c g r a/sub1 r/sub2; do touch -d @1000000000 $d; done
for d in a b c g; do touch $d/late; done
chmod 0555 r
`;
const STAT = `cd output/t && stat --cached=never -c '%n %f %a %h %u %g %s %b %B %o %i' . a b c g r a/sub1 a/sub2 r/sub2`;
const TIMES = `cd output/t && stat --cached=never -c '%n %.9X %.9Y %.9Z' a b c g r a/sub1 r/sub2`;

describe('GETATTRs of directories answered in the binding', () => {
  useMountHygiene();

  it('stat of every directory prints the same with and without it; the GETATTRs leave the worker', async () => {
    const seen: string[] = [];
    for (const disable of ['', 'nativeDirAttrs']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: WRITE_OUTPUT }),
      );
      const stats = await f.worker.client.request('stats', {});
      expect(stats.fuse?.features.nativeDirAttrs).toBe(disable === '');
      expect(await f.sandbox(MAKE)).toMatchObject({ code: 0, stderr: '' });
      const r = await f.sandbox(STAT);
      expect(r).toMatchObject({ code: 0, stderr: '' });
      // the inode numbers differ between two mounts: shown as their order of appearance
      const inos = new Map<string, number>();
      seen.push(
        r.stdout.replace(/ (\d+)\n/g, (_m, ino: string) => {
          if (!inos.has(ino)) inos.set(ino, inos.size);
          return ` ino${String(inos.get(ino))}\n`;
        }),
      );
      // times: as the host holds them in the writable layer, to the nanosecond
      const times = await f.sandbox(TIMES);
      expect(times.code).toBe(0);
      for (const line of times.stdout.trim().split('\n')) {
        const [name = '', x, y, z] = line.split(' ');
        const host = await lstat(join(f.delta, 'upper/output/t', name), { bigint: true });
        const ns = (t: bigint): string =>
          `${String(t / 1_000_000_000n)}.${String(t % 1_000_000_000n).padStart(9, '0')}`;
        expect(`${name} ${x} ${y} ${z}`).toBe(
          `${name} ${ns(host.atimeNs)} ${ns(host.mtimeNs)} ${ns(host.ctimeNs)}`,
        );
      }
      // each create in a marked directory costs a GETATTR of it: with the switch on, answered in C
      const before = await opCount(f, 'getattr');
      const nativeBefore = await opCount(f, 'attr-native');
      const loop = await f.sandbox('mkdir output/d && for i in $(seq 100); do echo $i > output/d/f$i; done');
      expect(loop).toMatchObject({ code: 0, stderr: '' });
      const inJs = (await opCount(f, 'getattr')) - before;
      const inC = (await opCount(f, 'attr-native')) - nativeBefore;
      if (disable === '') {
        expect(inJs).toBeLessThan(10);
        expect(inC).toBeGreaterThan(95);
      } else {
        expect(inJs).toBeGreaterThan(95);
      }
      await f.stop();
    }
    expect(seen[0]).toContain('\na 41ed 755 4 ');
    expect(seen[0]).toContain('\ng 45fd 2775 4 ');
    expect(seen[0]).toContain('\nr 416d 555 4 ');
    expect(seen[0]).toMatch(/^\. 41ed 755 7 /);
    expect(seen[0]).toContain('\nr/sub2 416d 555 2 ');
    expect(seen[1]).toBe(seen[0]);
  }, 120_000);

  it('AGENTFENSE_FUSE_DISABLE=nativeDirAttrs leaves directory GETATTRs to the worker', async () => {
    const f = await withEnv('AGENTFENSE_FUSE_DISABLE', 'nativeDirAttrs', () =>
      mountFixture({ tree: { output: { dir: true } }, rules: WRITE_OUTPUT }),
    );
    const stats = await f.worker.client.request('stats', {});
    expect(stats.fuse?.features.nativeDirAttrs).toBe(false);
    expect(stats.fuse?.features.nativeCreates).toBe(true);
    expect(stats.fuse?.disabled).toContain('nativeDirAttrs');
    const r = await f.sandbox(
      'mkdir output/d && for i in $(seq 20); do touch output/d/f$i; done && stat --cached=never -c %h output/d',
    );
    expect(r).toMatchObject({ code: 0, stdout: '2\n' });
    // the files' own GETATTRs and SETATTRs still go to the create fast path; none of the directory's
    expect(await opCount(f, 'getattr')).toBeGreaterThan(20);
  }, 60_000);
});
