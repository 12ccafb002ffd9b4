// Attack: get a CREATE answered by the binding (nativeCreates: creates in directories only the sandbox made
// are answered in C, fuse-native/native/fast-create.c) where the worker would have decided otherwise: past
// the disk quota, after a rule change that hides names in the directory, with a name that would break the
// journal record the binding writes itself, while the audit records allowed accesses, through a symlink
// in the directory. Each time the outcome must be the worker's. Defences: the binding spends only the
// write fast path's quota grant (a create is charged more than the worker checks; the rest goes to the
// worker), a rule change revokes every mark before it applies (FsCore.setRules, fast-entries.c's
// generation), the binding takes only printable ASCII names without `"` or `\` (the journal line needs no
// escaping), no create is answered in C while the audit records allowed accesses (FC_ON), and the file is
// made O_EXCL | O_NOFOLLOW in the directory's own fd, after an fstatat that finds no entry of that name.
import { readFile } from 'node:fs/promises';
import { clearFuseMount } from '@agentfense/fuse-worker';
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, withEnv, type MountedFixture } from '../helpers/worker-fixture.js';
import { nativeCount, ruleChangeRace, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const OPEN = WRITABLE_OUTPUT;

function nativeCreateCount(f: MountedFixture): Promise<number> {
  return nativeCount(f, 'create-native');
}

/** Python: creates empty files in output/q (new) until ENOSPC; prints the errno and how many were made. */
const FILL = `
import os, errno
os.mkdir("output/q")
n = 0
try:
    while True:
        os.path.exists("output/q/f%d" % n)
        os.close(os.open("output/q/f%d" % n, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        n += 1
except OSError as e:
    print(errno.errorcode[e.errno], n)
`;

describe('CREATEs answered in the binding: the worker keeps deciding what is not trivial', () => {
  useMountHygiene();

  it('the disk quota stops creates at the same file as the JS path, and nothing lands past it', async () => {
    const made: string[] = [];
    for (const disable of ['', 'nativeCreates']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: OPEN, diskQuotaBytes: 1024 * 1024 }),
      );
      const r = await f.sandbox(`python3 -c '${FILL}'`);
      expect(r.stderr).toBe('');
      expect(r.stdout).toMatch(/^ENOSPC \d+\n$/);
      if (disable === '') expect(await nativeCreateCount(f)).toBeGreaterThan(50);
      else expect(await nativeCreateCount(f)).toBe(0);
      const count = r.stdout.trim().split(' ')[1]!;
      expect((await f.host(`ls ${f.delta}/upper/output/q | wc -l`)).stdout.trim()).toBe(count);
      made.push(count);
      await f.stop();
    }
    expect(made[0]).toBe(made[1]);
  }, 120_000);

  it('a rule change that hides names in a directory being filled decides the next create', async () => {
    const { f, run } = await ruleChangeRace({
      fill: ['for i in $(seq 20); do test -e f$i; echo x > f$i; done'],
      after: ['{ if echo x > new.key; then echo made; else echo refused; fi; } 2>/dev/null'],
    });
    expect(await nativeCreateCount(f)).toBeGreaterThanOrEqual(15);
    const before = await nativeCreateCount(f);
    await f.worker.client.request('setRules', {
      rules: [...OPEN, { pattern: '**/*.key', permission: 'none' as const, priority: 100 }],
    });
    const r = await run;
    expect(r.stdout).toBe('refused\n');
    await f.waitAudit((e) => e.path === '/output/d/new.key' && e.decision === 'deny', 5000);
    expect(await nativeCreateCount(f)).toBe(before);
    expect((await f.host(`test -e ${f.delta}/upper/output/d/new.key; echo $?`)).stdout).toBe('1\n');
  }, 60_000);

  it('names that would need escaping in the journal are the worker’s: a crash recovers the delta as it was', async () => {
    const f = await mountFixture({ tree: { output: { dir: true }, 'README.md': 'keep\n' }, rules: OPEN });
    const r = await f.sandbox(
      `python3 -c 'import os
os.mkdir("output/d")
for i in range(5): open("output/d/f%d" % i, "w").close()
for n in ["a\\n{\\"op\\":\\"whiteout\\",\\"path\\":\\"README.md\\"}", "q\\",\\"base\\":{\\"exists\\":true}}", "b\\\\"]:
    open("output/d/" + n, "w").close()
print(len(os.listdir("output/d")))'`,
    );
    expect(r).toMatchObject({ code: 0, stdout: '8\n', stderr: '' });
    expect(await nativeCreateCount(f)).toBeGreaterThan(0);
    process.kill(f.worker.pid, 'SIGKILL');
    await f.worker.exited;
    await clearFuseMount(f.mnt);
    await f.stop();
    const g = await mountFixture({ rules: OPEN, lowerDir: f.lower, deltaDir: f.delta });
    expect((await g.sandbox('cat README.md; ls -q output/d | wc -l')).stdout).toBe('keep\n8\n');
    const { changes } = await g.worker.client.request('changes', {});
    expect(changes.map((c) => `${c.kind} ${c.path}`).filter((c) => !c.startsWith('added /output/d'))).toEqual(
      [],
    );
    expect(changes).toHaveLength(9);
  }, 60_000);

  it('while the audit records allowed accesses, every create is the worker’s and audited', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN, auditAllowed: true });
    const r = await f.sandbox(
      'mkdir output/d && for i in $(seq 10); do test -e output/d/f$i; echo x > output/d/f$i; done',
    );
    expect(r.code).toBe(0);
    await f.waitAudit((e) => e.path === '/output/d/f10' && e.op === 'create' && e.decision === 'allow', 5000);
    expect(f.audit.filter((e) => e.op === 'create' && e.path.startsWith('/output/d/'))).toHaveLength(10);
    expect(await nativeCreateCount(f)).toBe(0);
  }, 60_000);

  it('a symlink in a marked directory is followed by the sandbox’s kernel, never by the binding', async () => {
    const f = await mountFixture({ tree: { output: { dir: true }, 'README.md': 'keep\n' }, rules: OPEN });
    const r = await f.sandbox(
      [
        'mkdir output/d && for i in $(seq 5); do test -e output/d/f$i; echo x > output/d/f$i; done',
        'ln -s ../../README.md output/d/up && ln -s target output/d/dangling',
        '{ if echo bad > output/d/up; then echo made; else echo refused; fi; } 2>/dev/null',
        'echo good > output/d/dangling; cat output/d/target',
      ].join('\n'),
    );
    expect(r.stdout).toBe('refused\ngood\n');
    expect(await readFile(`${f.lower}/README.md`, 'utf8')).toBe('keep\n');
    expect(
      (await f.host(`stat -c %F ${f.delta}/upper/output/d/up ${f.delta}/upper/output/d/target`)).stdout,
    ).toBe('symbolic link\nregular file\n');
    expect(await nativeCreateCount(f)).toBeGreaterThan(3);
  }, 60_000);
});
