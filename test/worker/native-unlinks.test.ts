// UNLINKs of the sandbox's own files in directories only it made are answered by the binding in C
// (nativeUnlinks, docs/decisions.md, "UNLINKs of the sandbox's own files are answered in the binding").
// What a user checks: `rm -rf` of a tree made there sends next to no UNLINK to the worker, and what it
// leaves (listings, stat, the delta's change list, the writable layer, a delta recovered after a crash)
// is the same with and without it; a descriptor opened before still reads and writes the file; a codebase
// file (a whiteout) and a directory the rules shape still go to the worker; the switch turns it off. The
// attacks are in test/security/native-unlinks.test.ts.
import { clearFuseMount } from '@agentfense/fuse-worker';
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, withEnv, type MountedFixture } from '../helpers/worker-fixture.js';
import { nativeCount, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const OPEN = WRITABLE_OUTPUT;

async function counts(f: MountedFixture): Promise<{ native: number; worker: number }> {
  const { ops } = await f.worker.client.request('stats', {});
  return { native: ops['unlink-native']?.count ?? 0, worker: ops.unlink?.count ?? 0 };
}

/** Three directories of 30 files each, written; a fourth file kept for later. */
const MAKE = [
  'mkdir -p output/t/a output/t/b output/t/c output/keep',
  'for d in a b c; do for i in $(seq 30); do test -e output/t/$d/f$i; echo $d$i > output/t/$d/f$i; done; done',
  'echo kept > output/keep/k',
].join('\n');

describe('UNLINKs answered in the binding', () => {
  useMountHygiene();

  it('rm -rf of a tree made there leaves the worker alone and the same state as without it', async () => {
    const seen: string[] = [];
    const changes: string[][] = [];
    for (const disable of ['', 'nativeUnlinks']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: OPEN }),
      );
      const stats = await f.worker.client.request('stats', {});
      expect(stats.fuse?.features.nativeUnlinks).toBe(disable === '');
      expect(await f.sandbox(MAKE)).toMatchObject({ code: 0, stderr: '' });
      const before = await counts(f);
      const r = await f.sandbox(
        'rm -rf output/t/a output/t/b/* && rm output/t/c/f1 && ls -A output/t && ls -A output/t/b | wc -l && ' +
          'ls output/t/c | wc -l; stat output/t/c/f1 2>&1 | grep -c "No such"; cat output/t/c/f2 output/keep/k',
      );
      expect(r.stderr).toBe('');
      seen.push(r.stdout);
      const after = await counts(f);
      if (disable === '') {
        expect(after.native - before.native).toBeGreaterThanOrEqual(55);
        expect(after.worker - before.worker).toBeLessThanOrEqual(6);
      } else {
        expect(after.native).toBe(0);
        expect(after.worker - before.worker).toBe(61);
      }
      // gone from the writable layer too, the rest untouched
      expect(
        (
          await f.host(
            `ls ${f.delta}/upper/output/t; ls ${f.delta}/upper/output/t/b | wc -l; ls ${f.delta}/upper/output/t/c | wc -l`,
          )
        ).stdout,
      ).toBe('b\nc\n0\n29\n');
      const { changes: list } = await f.worker.client.request('changes', {});
      changes.push(list.map((c) => `${c.kind} ${c.path} ${c.type}`).sort());
      await f.stop();
    }
    expect(seen[0]).toBe('b\nc\n0\n29\n1\nc2\nkept\n');
    expect(seen[1]).toBe(seen[0]);
    expect(changes[1]).toEqual(changes[0]);
    expect(changes[0]!.filter((c) => c.includes('/output/t/a'))).toEqual([]);
  }, 120_000);

  it('after a rename ended every mark, the first UNLINK in a directory marks it for the rest', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN, warmupEntries: 0 });
    // a rename's decode ends every mark (git clone's last steps rename its lock files)
    expect(await f.sandbox(`${MAKE}\nmv output/keep/k output/keep/moved`)).toMatchObject({
      code: 0,
      stderr: '',
    });
    const before = await counts(f);
    expect(await f.sandbox('rm -rf output/t && ls -A output')).toMatchObject({ code: 0, stdout: 'keep\n' });
    const after = await counts(f);
    // one UNLINK per directory in the worker (3), the other 87 in C
    expect(after.worker - before.worker).toBeLessThanOrEqual(6);
    expect(after.native - before.native).toBeGreaterThanOrEqual(84);
    expect((await f.host(`ls -A ${f.delta}/upper/output`)).stdout).toBe('keep\n');
  }, 60_000);

  it('a descriptor opened before the unlink still reads and writes the file', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN });
    const before = await counts(f);
    const r = await f.sandbox(
      `python3 -c 'import os
os.makedirs("output/o")
for i in range(3): open("output/o/f%d" % i, "w").write("x" * i)
open("output/o/f", "w").write("hello ")
fd = os.open("output/o/f", os.O_RDWR)
os.unlink("output/o/f")
print(os.path.exists("output/o/f"), sorted(os.listdir("output/o")))
os.lseek(fd, 0, 2); os.write(fd, b"world"); os.lseek(fd, 0, 0)
print(os.read(fd, 100).decode(), os.fstat(fd).st_nlink)'`,
    );
    expect(r).toMatchObject({ code: 0, stderr: '', stdout: "False ['f0', 'f1', 'f2']\nhello world 0\n" });
    expect((await counts(f)).native - before.native).toBe(1);
  }, 60_000);

  it('a codebase file and a directory the rules shape are the worker’s, as before', async () => {
    const f = await mountFixture({
      tree: { output: { dir: true }, 'output/code.txt': 'codebase\n' },
      rules: [...OPEN, { pattern: '/output/s/keep', permission: 'read' as const, priority: 20 }],
    });
    expect(
      await f.sandbox(
        'mkdir output/s output/n && touch output/s/x output/n/y && echo more >> output/code.txt',
      ),
    ).toMatchObject({ code: 0, stderr: '' });
    const before = await counts(f);
    const r = await f.sandbox(
      'rm output/code.txt output/s/x && ls output | tr "\\n" " "; ls output/s | wc -l',
    );
    expect(r).toMatchObject({ code: 0, stderr: '', stdout: 'n s 0\n' });
    const after = await counts(f);
    expect(after.native).toBe(before.native);
    expect(after.worker - before.worker).toBe(2);
    // the codebase file is whited out, never removed from the codebase
    expect((await f.host(`cat ${f.lower}/output/code.txt`)).stdout).toBe('codebase\n');
    const { changes } = await f.worker.client.request('changes', {});
    expect(changes.filter((c) => c.path === '/output/code.txt').map((c) => c.kind)).toEqual(['deleted']);
  }, 60_000);

  it('a worker SIGKILLed right after unlinks answered in C has them all in its recovered delta', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN });
    const w = await f.sandbox(
      'mkdir -p output/k && for i in $(seq 40); do test -e output/k/f$i; echo $i > output/k/f$i; done && ' +
        'for i in $(seq 30); do rm output/k/f$i; done',
    );
    expect(w).toMatchObject({ code: 0, stderr: '' });
    expect((await counts(f)).native).toBeGreaterThanOrEqual(28);
    process.kill(f.worker.pid, 'SIGKILL');
    await f.worker.exited;
    await clearFuseMount(f.mnt);
    await f.stop();
    const g = await mountFixture({ rules: OPEN, lowerDir: f.lower, deltaDir: f.delta });
    expect((await g.sandbox('cat output/k/f31 output/k/f40; ls output/k | wc -l')).stdout).toBe(
      '31\n40\n10\n',
    );
    const { changes } = await g.worker.client.request('changes', {});
    expect(changes.filter((c) => c.path.startsWith('/output/k/'))).toHaveLength(10);
  }, 60_000);

  it('AGENTFENSE_FUSE_DISABLE=nativeUnlinks leaves every UNLINK to the worker', async () => {
    const f = await withEnv('AGENTFENSE_FUSE_DISABLE', 'nativeUnlinks', () =>
      mountFixture({ tree: { output: { dir: true } }, rules: OPEN }),
    );
    const stats = await f.worker.client.request('stats', {});
    expect(stats.fuse?.disabled).toContain('nativeUnlinks');
    expect(
      await f.sandbox('mkdir output/d && touch output/d/a output/d/b && rm output/d/a output/d/b'),
    ).toMatchObject({ code: 0 });
    expect(await counts(f)).toEqual({ native: 0, worker: 2 });
    expect(await nativeCount(f, 'create-native')).toBeGreaterThan(0);
  }, 60_000);
});
