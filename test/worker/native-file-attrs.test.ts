// GETATTRs and SETXATTRs of files the binding made are answered in C on the fd their READs are served from
// once the write fd is closed (docs/decisions.md, "Attributes and extended attributes of the sandbox's own
// closed files are answered in the binding"). What a user checks: `stat` of files made, closed and read
// back shows the same owner, mode, size, link count, times and inode numbers with and without it, an
// extended attribute is refused as before (EOPNOTSUPP), and the requests stay out of the worker. The
// attacks are in test/security/native-file-attrs.test.ts.
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, withEnv } from '../helpers/worker-fixture.js';
import { nativeCount, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

/** Makes output/f with 20 files (mode 640, fixed mtimes), closed, then reads each back. */
const MAKE_AND_READ = [
  'mkdir -p output/f && cd output/f',
  'for i in $(seq 20); do printf "line %s\\n" $i > f$i; chmod 640 f$i; touch -d @$((1700000000 + i)) f$i; done',
  'cat f* > /dev/null',
  'stat -c "%n %i" f* | sort',
].join(' && ');

/** Python: setxattr on each file; prints each distinct outcome. */
const SETXATTR = `
import errno, os
seen = set()
for i in range(1, 21):
    try:
        os.setxattr("output/f/f%d" % i, "user.x", b"1")
        seen.add("set")
    except OSError as e:
        seen.add(errno.errorcode[e.errno])
print(" ".join(sorted(seen)))
`;

describe('attributes of closed files the binding made', () => {
  useMountHygiene();

  it('stat after a read and setxattr answer the same with and without the binding', async () => {
    const seen: string[] = [];
    for (const disable of ['', 'nativeCreates']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: WRITABLE_OUTPUT, warmupEntries: 0 }),
      );
      const made = await f.sandbox(MAKE_AND_READ);
      expect(made).toMatchObject({ code: 0, stderr: '' });
      const attrsBefore = await nativeCount(f, 'attr-native');
      const inos = await f.sandbox('cd output/f && stat --cached=never -c "%n %i" f* | sort');
      // the inode numbers shown when the files were made, again
      expect(inos.stdout).toBe(made.stdout);
      const r = await f.sandbox('stat --cached=never -c "%n %a %U %G %s %h %b %Y" output/f/f* | sort');
      expect(r).toMatchObject({ code: 0, stderr: '' });
      const x = await f.sandbox(`python3 -c '${SETXATTR}'`);
      expect(x).toMatchObject({ code: 0, stderr: '' });
      seen.push(r.stdout + x.stdout);
      const attrs = (await nativeCount(f, 'attr-native')) - attrsBefore;
      const xattrs = await nativeCount(f, 'xattr-native');
      if (disable === '') {
        // every file's GETATTR (twice) and SETXATTR, though each file's write fd is closed
        expect(attrs).toBeGreaterThanOrEqual(40);
        expect(xattrs).toBe(20);
      } else {
        expect(attrs).toBe(0);
        expect(xattrs).toBe(0);
      }
      await f.stop();
    }
    expect(seen[0]).toContain('output/f/f7 ');
    expect(seen[0]).toMatch(/f7 640 \S+ \S+ 7 1 \d+ 1700000007\n/);
    expect(seen[0]!.endsWith('ENOTSUP\n')).toBe(true);
    expect(seen[1]).toBe(seen[0]);
  }, 120_000);
});
