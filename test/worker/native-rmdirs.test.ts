// RMDIRs of empty directories the sandbox made, in directories only it made, are answered by the binding
// in C (nativeRmdirs, docs/decisions.md, "RMDIRs of the sandbox's own empty directories are answered in
// the binding"). What a user checks: `rm -rf` of a tree made there sends next to no RMDIR to the worker,
// and what it leaves (names, types and inode numbers of what stays, the delta's change list, the writable
// layer, a delta recovered after a crash) is the same with and without it; a directory with something in
// it is refused as before; the audit of allowed accesses still records each RMDIR; the switch turns it
// off. The attacks are in test/security/native-rmdirs.test.ts.
import { clearFuseMount } from '@agentfense/fuse-worker';
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, withEnv, type MountedFixture } from '../helpers/worker-fixture.js';
import { nativeCount, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const OPEN = WRITABLE_OUTPUT;

async function counts(f: MountedFixture): Promise<{ native: number; worker: number }> {
  const { ops } = await f.worker.client.request('stats', {});
  return { native: ops['rmdir-native']?.count ?? 0, worker: ops.rmdir?.count ?? 0 };
}

/** A tree of 3 x 4 directories with a file each, and one kept beside it; `test -e` misses mark them. */
const MAKE = [
  'mkdir -p output/t output/keep/sub && test -e output/t/x',
  'for d in a b c; do mkdir output/t/$d && test -e output/t/$d/x; for i in 1 2 3 4; do ' +
    'mkdir output/t/$d/s$i && echo $d$i > output/t/$d/s$i/f; done; done',
  'echo kept > output/keep/k',
].join('\n');

/** What stays, as the sandbox sees it: name, type and inode number of each entry made there. */
const SEEN = 'find output/t output/keep -printf "%p %y %i\\n" | sort';

describe('RMDIRs answered in the binding', () => {
  useMountHygiene();

  it('rm -rf of a tree made there leaves the worker alone and the same state as without it', async () => {
    const names: string[] = [];
    const changes: string[][] = [];
    for (const disable of ['', 'nativeRmdirs']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: OPEN }),
      );
      const stats = await f.worker.client.request('stats', {});
      expect(stats.fuse?.features.nativeRmdirs).toBe(disable === '');
      expect(await f.sandbox(MAKE)).toMatchObject({ code: 0, stderr: '' });
      const before = await counts(f);
      const r = await f.sandbox(`rm -rf output/t/a output/t/b/* && rmdir output/t/c/s1/ 2>&1; ${SEEN}`);
      expect(r.code).toBe(0);
      const after = await counts(f);
      if (disable === '') {
        // output/t/a, its 4 and b's 4: all in C (their parents are marked)
        expect(after.native - before.native).toBe(9);
        expect(after.worker - before.worker).toBe(1); // c/s1 is not empty: refused by the worker
      } else {
        expect(after.native).toBe(0);
        expect(after.worker - before.worker).toBe(10);
      }
      expect(r.stdout).toContain("rmdir: failed to remove 'output/t/c/s1/': Directory not empty\n");
      // the inode numbers the sandbox sees are the writable layer's, as the worker shows them
      const lines = r.stdout.split('\n').filter((l) => l.startsWith('output'));
      const host = await f.host(
        `cd ${f.delta}/upper && find output/t output/keep -printf "%p %y %i\\n" | sort`,
      );
      expect(lines.join('\n') + '\n').toBe(host.stdout);
      names.push(lines.map((l) => l.split(' ').slice(0, 2).join(' ')).join('\n'));
      const { changes: list } = await f.worker.client.request('changes', {});
      changes.push(list.map((c) => `${c.kind} ${c.path} ${c.type}`).sort());
      await f.stop();
    }
    expect(names[0]).toContain('output/t/b d\noutput/t/c d\n');
    expect(names[0]).not.toContain('output/t/a');
    expect(names[1]).toBe(names[0]);
    expect(changes[1]).toEqual(changes[0]);
    expect(changes[0]!.filter((c) => c.includes('/output/t/a') || c.includes('/output/t/b/'))).toEqual([]);
    expect(changes[0]).toContain('added /output/t/c/s1 directory');
  }, 120_000);

  it('a directory removed while it is a cwd: the process there sees what the worker shows', async () => {
    const seen: string[] = [];
    for (const disable of ['', 'nativeRmdirs']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: OPEN }),
      );
      const r = await f.sandbox(
        [
          'mkdir -p output/d/e; test -e output/d/x; cd output/d/e',
          'rmdir ../e && stat --cached=never -c "%h" . && ls -a 2>&1',
          'touch f 2>&1; cd .. && mkdir e && touch e/g && ls e',
        ].join('\n'),
      );
      expect(r).toMatchObject({ code: 0, stderr: '' });
      seen.push(r.stdout);
      expect((await counts(f)).native).toBe(disable === '' ? 1 : 0);
      await f.stop();
    }
    expect(seen[1]).toBe(seen[0]);
    // no links, no entries, no new name in it; a new directory of that name is a new one
    expect(seen[0]).toBe("0\ntouch: cannot touch 'f': No such file or directory\ng\n");
  }, 60_000);

  it('while the audit records allowed accesses, every rmdir is the worker’s and audited', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN, auditAllowed: true });
    const r = await f.sandbox(
      'mkdir output/d && test -e output/d/x; for i in 1 2 3; do mkdir output/d/e$i; done && rmdir output/d/e*',
    );
    expect(r).toMatchObject({ code: 0, stderr: '' });
    await f.waitAudit((e) => e.path === '/output/d/e3' && e.op === 'rmdir' && e.decision === 'allow', 5000);
    expect(f.audit.filter((e) => e.op === 'rmdir').map((e) => e.path)).toEqual([
      '/output/d/e1',
      '/output/d/e2',
      '/output/d/e3',
    ]);
    expect(await counts(f)).toEqual({ native: 0, worker: 3 });
  }, 60_000);

  it('a worker SIGKILLed right after rmdirs answered in C has them all in its recovered delta', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN });
    const w = await f.sandbox(
      'mkdir -p output/k && test -e output/k/x; for i in $(seq 20); do mkdir output/k/e$i; done && ' +
        'for i in $(seq 15); do rmdir output/k/e$i; done',
    );
    expect(w).toMatchObject({ code: 0, stderr: '' });
    expect((await counts(f)).native).toBe(15);
    process.kill(f.worker.pid, 'SIGKILL');
    await f.worker.exited;
    await clearFuseMount(f.mnt);
    await f.stop();
    const g = await mountFixture({ rules: OPEN, lowerDir: f.lower, deltaDir: f.delta });
    expect((await g.sandbox('ls output/k | sort -V | tr "\\n" " "')).stdout).toBe('e16 e17 e18 e19 e20 ');
    const { changes } = await g.worker.client.request('changes', {});
    expect(changes.filter((c) => c.path.startsWith('/output/k/')).map((c) => c.path)).toHaveLength(5);
  }, 60_000);

  it('AGENTFENSE_FUSE_DISABLE=nativeRmdirs leaves every RMDIR to the worker', async () => {
    const f = await withEnv('AGENTFENSE_FUSE_DISABLE', 'nativeRmdirs', () =>
      mountFixture({ tree: { output: { dir: true } }, rules: OPEN }),
    );
    const stats = await f.worker.client.request('stats', {});
    expect(stats.fuse?.disabled).toContain('nativeRmdirs');
    expect(
      await f.sandbox(
        'mkdir output/d && test -e output/d/x; mkdir output/d/a output/d/b && rmdir output/d/a output/d/b',
      ),
    ).toMatchObject({ code: 0 });
    expect(await counts(f)).toEqual({ native: 0, worker: 2 });
    expect(await nativeCount(f, 'unlink-native')).toBe(0);
  }, 60_000);
});
