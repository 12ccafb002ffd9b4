// LOOKUPs of missing names in directories only the sandbox made are answered by the binding in C
// (nativeLookups, docs/decisions.md, "LOOKUP misses in the sandbox's own directories are answered in the
// binding"). What a user checks: a tree extracted into a fresh directory is the same with and without it,
// missing names stay missing and existing ones are found, a directory the codebase gains is seen, a name
// the binding does not take (non-ASCII) is answered as before, and the switch turns it off. The attacks
// (rule changes, renames, hidden names, symlinks) are in test/security/native-lookups.test.ts.
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, withEnv, type MountedFixture } from '../helpers/worker-fixture.js';
import { nativeCount, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const WRITE_OUTPUT = WRITABLE_OUTPUT;

function nativeLookupCount(f: MountedFixture): Promise<number> {
  return nativeCount(f, 'lookup-native');
}

/**
 * Python: makes output/t/a..c/ and 30 files in each with mode and times set (what `tar -x` does), checks
 * missing names before and after, reads everything back; prints one line per observation.
 */
const EXTRACT = `
import os, stat
out = []
os.makedirs("output/t")
for d in "abc":
    p = "output/t/" + d
    out.append("before %s %s" % (d, os.path.exists(p)))
    os.mkdir(p, 0o755)
    for i in range(30):
        f = "%s/f%d.txt" % (p, i)
        out.append("missing %s" % os.path.lexists(f))
        fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, (f * 50).encode())
        os.close(fd)
        os.chmod(f, 0o640)
        os.utime(f, ns=(1_000_000_000 * i, 1_000_000_123 * i))
for d in "abc":
    for i in range(30):
        f = "output/t/%s/f%d.txt" % (d, i)
        st = os.lstat(f)
        ok = open(f).read() == f * 50 and stat.S_IMODE(st.st_mode) == 0o640 and st.st_mtime_ns == 1_000_000_123 * i
        out.append("file %s" % ok)
    out.append("missing-after %s" % os.path.lexists("output/t/%s/nope" % d))
try:
    os.open("output/t/a/f1.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    out.append("excl created")
except FileExistsError:
    out.append("excl EEXIST")
print("\\n".join(sorted(set(out))))
`;

describe('LOOKUP misses answered in the binding', () => {
  useMountHygiene();

  it('a tree made in a fresh directory is the same with and without the binding answering', async () => {
    const seen: string[] = [];
    for (const disable of ['', 'nativeLookups']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: WRITE_OUTPUT }),
      );
      const r = await f.sandbox(`python3 -c '${EXTRACT}'`);
      expect(r.stderr).toBe('');
      seen.push(r.stdout);
      const stats = await f.worker.client.request('stats', {});
      expect(stats.fuse?.features.nativeLookups).toBe(disable === '');
      // One miss per directory reaches the worker and marks it; the other ~90 are answered in C.
      if (disable === '') expect(await nativeLookupCount(f)).toBeGreaterThan(80);
      else expect(await nativeLookupCount(f)).toBe(0);
      const listing = await f.host(`cd ${f.delta}/upper/output/t && find . -type f | wc -l`);
      expect(listing.stdout.trim()).toBe('90');
      await f.stop();
    }
    expect(seen[0]).toBe(
      [
        'before a False',
        'before b False',
        'before c False',
        'excl EEXIST',
        'file True',
        'missing False',
        'missing-after False',
      ].join('\n') + '\n',
    );
    expect(seen[1]).toBe(seen[0]);
  }, 120_000);

  it('names the binding does not take, existing names and a directory the codebase gains: as without it', async () => {
    const seen: string[] = [];
    for (const disable of ['', 'nativeLookups']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: WRITE_OUTPUT }),
      );
      expect((await f.sandbox('mkdir output/n && touch output/n/here && test ! -e output/n/x1')).code).toBe(
        0,
      );
      const before = await nativeLookupCount(f);
      // existing: found (the worker); non-ASCII missing: the worker's answer; a plain miss: the binding's
      const r = await f.sandbox(
        `python3 -c 'import os
print(os.path.exists("output/n/here"), os.path.exists("output/n/caf\\u00e9"), os.path.exists("output/n/x2"))'`,
      );
      expect(r.stdout).toBe('True False False\n');
      expect(await nativeLookupCount(f)).toBe(disable === '' ? before + 1 : 0);
      // The codebase gains the directory behind the mount: what the sandbox sees is the worker's answer.
      await f.host(`mkdir -p ${f.lower}/output/n && echo lower > ${f.lower}/output/n/fromlower`);
      const g = await f.sandbox('cat output/n/fromlower; ls output/n');
      seen.push(g.stdout);
      expect(await nativeLookupCount(f)).toBe(disable === '' ? before + 1 : 0);
      await f.stop();
    }
    expect(seen[0]).toBe(seen[1]);
  }, 60_000);
});
