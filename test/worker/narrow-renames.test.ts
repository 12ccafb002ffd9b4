// A RENAME of a file keeps the binding's fast paths (narrowRenames, docs/decisions.md, "A rename of a
// file keeps the fast paths"): what `git clone` does last (a lock file written, then renamed over its
// target) leaves the marks of the sandbox's own directories and the other files' registrations in place.
// What a user checks: after such renames, reading the rest of files already read, listing the tree and
// looking up missing names are still answered in C (the worker's `stats`), and what the sandbox sees is
// what it sees with the switch off. The attacks are in test/security/narrow-renames.test.ts.
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, withEnv, type MountedFixture } from '../helpers/worker-fixture.js';
import { WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const FILES = 8;

/** output/repo and output/repo/.git, each marked (a miss looked up), and FILES files of 4 MiB written
 * write-only (direct I/O: nothing of them in the mount's page cache). */
const MAKE = [
  'mkdir -p output/repo/.git && test -e output/repo/x; test -e output/repo/.git/x',
  `for i in $(seq ${String(FILES)}); do head -c 4194304 /dev/urandom > output/repo/f$i; done`,
].join('\n');

/** Python: reads the first MiB of each file (the worker registers each for the binding's READs). */
const READ_HEADS = `
for i in range(1, ${String(FILES + 1)}):
    with open(f"output/repo/f{i}", "rb") as o: o.read(1 << 20)
`;

/** Python: git's last steps (lock files written and renamed over their targets), then the sha256 of the
 * files' last MiB. */
const RENAME_THEN_READ = `
import os, hashlib
for name in ["index", "packed-refs", "HEAD", "config"]:
    with open(f"output/repo/.git/{name}.lock", "w") as o: o.write(name)
    os.rename(f"output/repo/.git/{name}.lock", f"output/repo/.git/{name}")
h = hashlib.sha256()
for i in range(1, ${String(FILES + 1)}):
    with open(f"output/repo/f{i}", "rb") as o:
        o.seek(3 << 20)
        h.update(o.read())
print(h.hexdigest())
`;

const SEEN = 'find output/repo -printf "%p %y %m %n %s\\n" | sort; test -e output/repo/.git/missing; echo $?';

type Counts = Record<'read' | 'readNative' | 'listing' | 'listingNative' | 'lookupNative', number>;

async function counts(f: MountedFixture): Promise<Counts> {
  const { ops } = await f.worker.client.request('stats', {});
  const n = (op: string): number => ops[op]?.count ?? 0;
  return {
    read: n('read'),
    readNative: n('read-native'),
    listing: n('readdirplus') + n('readdir'),
    listingNative: n('readdirplus-native'),
    lookupNative: n('lookup-native'),
  };
}

function since(after: Counts, before: Counts): Counts {
  const out = { ...after };
  for (const k of Object.keys(out) as (keyof Counts)[]) out[k] -= before[k];
  return out;
}

describe('renames of files keep the fast paths', () => {
  useMountHygiene();

  it('after git-like lock renames, READs, listings and lookups stay in the binding; the same is seen', async () => {
    const seen: string[] = [];
    const deltas: Counts[] = [];
    for (const disable of ['', 'narrowRenames']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: WRITABLE_OUTPUT, warmupEntries: 0 }),
      );
      expect((await f.worker.client.request('stats', {})).fuse?.features.narrowRenames).toBe(disable === '');
      expect(await f.sandbox(MAKE)).toMatchObject({ code: 0, stderr: '' });
      expect(await f.sandbox(`python3 -c '${READ_HEADS}'`)).toMatchObject({ code: 0, stderr: '' });
      const before = await counts(f);
      const r = await f.sandbox(`python3 -c '${RENAME_THEN_READ}'\n${SEEN}`);
      expect(r).toMatchObject({ code: 0, stderr: '' });
      deltas.push(since(await counts(f), before));
      // the host's bytes and entries, as the sandbox sees them
      const host = await f.host(
        `cd ${f.delta}/upper && for i in $(seq ${String(FILES)}); do tail -c 1048576 output/repo/f$i; done | sha256sum`,
      );
      const [sum, ...entries] = r.stdout.split('\n');
      expect(sum).toBe(host.stdout.split(' ')[0]);
      seen.push(entries.join('\n'));
      await f.stop();
    }
    const [on, off] = deltas as [Counts, Counts];
    // every file's registration outlived the renames; without the switch each file's next READ is the
    // worker's to decide again
    expect(on.readNative).toBeGreaterThan(0);
    expect(on.read).toBe(0);
    expect(off.read).toBeGreaterThanOrEqual(FILES);
    // both directories' marks outlived them too: more of the listing and the lookups stay in C
    expect(on.listingNative).toBeGreaterThan(off.listingNative);
    expect(on.listing).toBeLessThan(off.listing);
    expect(on.lookupNative).toBeGreaterThan(off.lookupNative);
    // the files' contents are random: the same entries, sizes and modes, and the missing name missing
    expect(seen[0]).toContain('output/repo/.git/packed-refs f 644 1 11\n');
    expect(seen[0]).not.toContain('.lock');
    expect(seen[0]).toMatch(/\n1\n$/);
    expect(seen[1]).toBe(seen[0]);
  }, 180_000);
});
