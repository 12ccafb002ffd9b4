// CREATEs in directories only the sandbox made are answered by the binding in C (nativeCreates,
// docs/decisions.md, "CREATEs in the sandbox's own directories are answered in the binding"). What a user
// checks: a tree extracted into a fresh directory is the same with and without it (content, modes, times,
// sizes, inode numbers stable), later lookups and listings see every file, the delta's change list and a
// commit carry them, a worker killed right after the creates loses none of them, names the binding does
// not take are created as before, and the switch turns it off. The attacks are in
// test/security/native-creates.test.ts.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { clearFuseMount } from '@agentfense/fuse-worker';
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, withEnv, type MountedFixture } from '../helpers/worker-fixture.js';
import { nativeCount, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const WRITE_OUTPUT = WRITABLE_OUTPUT;

function nativeCreateCount(f: MountedFixture): Promise<number> {
  return nativeCount(f, 'create-native');
}

/**
 * Python: makes output/t/a..c/ with 30 files each, written, chmod'ed and utime'd (what `tar -x` does),
 * then checks each file's content, mode, times, size and that its inode number stays the same across a
 * write and a chmod; lists the directories; prints one line per observation.
 */
const EXTRACT = `
import os, stat
out = []
os.makedirs("output/t")
inos = {}
for d in "abc":
    p = "output/t/" + d
    os.mkdir(p, 0o755)
    for i in range(30):
        f = "%s/f%d.txt" % (p, i)
        out.append("missing %s" % os.path.lexists(f))
        fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        inos[f] = os.fstat(fd).st_ino
        os.write(fd, (f * 50).encode())
        os.close(fd)
        os.chmod(f, 0o640)
        os.utime(f, ns=(1_000_000_000 * i, 1_000_000_123 * i))
for d in "abc":
    for i in range(30):
        f = "output/t/%s/f%d.txt" % (d, i)
        st = os.lstat(f)
        ok = open(f).read() == f * 50 and stat.S_IMODE(st.st_mode) == 0o640 and st.st_mtime_ns == 1_000_000_123 * i
        out.append("file %s size %s ino-stable %s" % (ok, st.st_size == len(f) * 50, st.st_ino == inos[f]))
    out.append("listing %s" % (sorted(os.listdir("output/t/" + d)) == sorted("f%d.txt" % i for i in range(30))))
try:
    os.open("output/t/a/f1.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    out.append("excl created")
except FileExistsError:
    out.append("excl EEXIST")
fd = os.open("output/t/a/rw", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"hello")
os.lseek(fd, 0, 0)
out.append("rw %s" % os.read(fd, 5))
os.close(fd)
print("\\n".join(sorted(set(out))))
`;

describe('CREATEs answered in the binding', () => {
  useMountHygiene();

  it('a tree made in a fresh directory is the same with and without the binding creating', async () => {
    const seen: string[] = [];
    const changes: string[][] = [];
    for (const disable of ['', 'nativeCreates']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: WRITE_OUTPUT }),
      );
      const r = await f.sandbox(`python3 -c '${EXTRACT}'`);
      expect(r.stderr).toBe('');
      seen.push(r.stdout);
      const stats = await f.worker.client.request('stats', {});
      expect(stats.fuse?.features.nativeCreates).toBe(disable === '');
      // One create per directory may reach the worker before the directory is marked; the rest are C's.
      if (disable === '') expect(await nativeCreateCount(f)).toBeGreaterThan(80);
      else expect(await nativeCreateCount(f)).toBe(0);
      // the chmod and utime of each file made there: answered on the binding's fd
      const attrs = await nativeCount(f, 'attr-native');
      if (disable === '') expect(attrs).toBeGreaterThan(160);
      else expect(attrs).toBe(0);
      // later requests from the worker see them: a listing, a rename, an unlink
      const later = await f.sandbox(
        'ls output/t/b | wc -l && mv output/t/b/f1.txt output/t/b/moved && rm output/t/b/f2.txt && ls output/t/b | wc -l',
      );
      expect(later).toMatchObject({ code: 0, stdout: '30\n29\n' });
      const { changes: list } = await f.worker.client.request('changes', {});
      changes.push(list.map((c) => `${c.kind} ${c.path} ${c.type} ${String(c.size)} ${String(c.mode)}`));
      await f.worker.client.request('commit', { mode: 'last-writer-wins' });
      expect(await readFile(join(f.lower, 'output/t/c/f7.txt'), 'utf8')).toBe('output/t/c/f7.txt'.repeat(50));
      expect((await stat(join(f.lower, 'output/t/c/f7.txt'))).mode & 0o777).toBe(0o640);
      await f.stop();
    }
    expect(seen[0]).toBe(
      [
        'excl EEXIST',
        'file True size True ino-stable True',
        'listing True',
        'missing False',
        "rw b'hello'",
      ].join('\n') + '\n',
    );
    expect(seen[1]).toBe(seen[0]);
    expect(changes[0]).toHaveLength(94);
    expect(changes[1]).toEqual(changes[0]);
  }, 120_000);

  it('a worker SIGKILLed right after creates answered in C loses none of them', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: WRITE_OUTPUT });
    const w = await f.sandbox(
      'mkdir -p output/k && for i in $(seq 50); do test -e output/k/f$i; echo $i > output/k/f$i; done',
    );
    expect(w).toMatchObject({ code: 0, stderr: '' });
    expect(await nativeCreateCount(f)).toBeGreaterThan(40);
    process.kill(f.worker.pid, 'SIGKILL');
    await f.worker.exited;
    await clearFuseMount(f.mnt);
    await f.stop();
    const g = await mountFixture({ rules: WRITE_OUTPUT, lowerDir: f.lower, deltaDir: f.delta });
    expect((await g.sandbox('cat output/k/f1 output/k/f50; ls output/k | wc -l')).stdout).toBe('1\n50\n50\n');
    // every file is an add of its own in the recovered delta (its journal record was written before it)
    const { changes } = await g.worker.client.request('changes', {});
    expect(changes.filter((c) => c.kind === 'added' && c.path.startsWith('/output/k/'))).toHaveLength(50);
  }, 60_000);

  it('a file made in C is read back by the binding from its first READ', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: WRITE_OUTPUT });
    const w = await f.sandbox('mkdir -p output/r && for i in $(seq 30); do echo line$i > output/r/f$i; done');
    expect(w).toMatchObject({ code: 0, stderr: '' });
    expect(await nativeCreateCount(f)).toBeGreaterThan(25);
    const before = await f.worker.client.request('stats', {});
    const r = await f.sandbox('for i in $(seq 30); do cat output/r/f$i; done | sort -u | wc -l');
    expect(r).toMatchObject({ code: 0, stdout: '30\n' });
    const after = await f.worker.client.request('stats', {});
    const count = (s: typeof after, op: string): number => s.ops[op]?.count ?? 0;
    // written with direct I/O, nothing is in the page cache: each cat sends a READ, answered in C
    expect(count(after, 'read-native') - count(before, 'read-native')).toBeGreaterThanOrEqual(28);
    expect(count(after, 'read') - count(before, 'read')).toBeLessThanOrEqual(2);
  }, 60_000);

  it('names the binding does not take are created by the worker, as before', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: WRITE_OUTPUT });
    expect((await f.sandbox('mkdir output/n && test ! -e output/n/x && touch output/n/a')).code).toBe(0);
    const before = await nativeCreateCount(f);
    const r = await f.sandbox(
      `touch output/n/caf$(printf "\\303\\251") 'output/n/q"uote' 'output/n/back\\slash' && touch output/n/plain && ls output/n`,
    );
    expect(r).toMatchObject({ code: 0, stdout: 'a\nback\\slash\ncafé\nplain\nq"uote\n' });
    expect(await nativeCreateCount(f)).toBe(before + 1);
  }, 60_000);

  it('AGENTFENSE_FUSE_DISABLE=nativeCreates creates every file in JS', async () => {
    const f = await withEnv('AGENTFENSE_FUSE_DISABLE', 'nativeCreates', () =>
      mountFixture({ tree: { output: { dir: true } }, rules: WRITE_OUTPUT }),
    );
    const stats = await f.worker.client.request('stats', {});
    expect(stats.fuse?.features.nativeCreates).toBe(false);
    expect(stats.fuse?.disabled).toContain('nativeCreates');
    expect((await f.sandbox('mkdir output/d && for i in $(seq 10); do touch output/d/f$i; done')).code).toBe(
      0,
    );
    expect(await nativeCreateCount(f)).toBe(0);
    expect((await f.worker.client.request('stats', {})).ops.create?.count).toBe(10);
  }, 60_000);
});
