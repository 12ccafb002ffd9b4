// Attack: get an UNLINK answered by the binding (nativeUnlinks: UNLINKs of the sandbox's own files in
// directories only it made are answered in C, fuse-native/native/fast-unlink.c) where the worker would have
// decided otherwise: after a rule change that makes names in the directory read-only, on a codebase file the sandbox
// changed (its removal needs a whiteout, else the codebase's copy shows again), through a symlink in the
// directory, while the audit records allowed accesses. Each time the outcome must be the worker's.
// Defences: a rule change revokes every mark before it applies (fast-entries.c's generation); only
// directories the writable layer alone holds are marked (delta/fast-dir.ts isAddedDir) and the binding
// checks at each answer that the codebase still lacks the directory (fast-entries.c current_dir); only a
// regular file is opened and removed, never followed (fstatat and openat with O_NOFOLLOW, unlinkat on the
// directory's own fd); nothing is answered in C while the audit records allowed accesses (FC_ON).
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, type MountedFixture } from '../helpers/worker-fixture.js';
import { nativeCount, ruleChangeRace, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const OPEN = WRITABLE_OUTPUT;

function nativeUnlinkCount(f: MountedFixture): Promise<number> {
  return nativeCount(f, 'unlink-native');
}

describe('UNLINKs answered in the binding: the worker keeps deciding what is not trivial', () => {
  useMountHygiene();

  it('a rule change that makes names in a directory read-only decides the next unlink there', async () => {
    const { f, run } = await ruleChangeRace({
      fill: ['for i in $(seq 20); do test -e f$i; echo x > f$i; done', 'rm f1 f2 f3'],
      after: ['{ if rm f10; then echo removed; else echo refused; fi; } 2>/dev/null'],
    });
    expect(await nativeUnlinkCount(f)).toBe(3);
    await f.worker.client.request('setRules', {
      // f10 and its like only: the directory stays writable, so the kernel asks
      rules: [...OPEN, { pattern: '/output/d/f1*', permission: 'read' as const, priority: 100 }],
    });
    const r = await run;
    expect(r.stdout).toBe('refused\n');
    await f.waitAudit((e) => e.path === '/output/d/f10' && e.decision === 'deny', 5000);
    expect(await nativeUnlinkCount(f)).toBe(3);
    expect((await f.host(`cat ${f.delta}/upper/output/d/f10`)).stdout).toBe('x\n');
  }, 60_000);

  it('a codebase file the sandbox changed stays deleted: whited out, the codebase copy untouched', async () => {
    const f = await mountFixture({
      tree: { output: { dir: true }, 'output/lib/code.txt': 'codebase\n' },
      rules: OPEN,
    });
    const r = await f.sandbox(
      [
        // the codebase file copied up by a write (the writable layer now holds the directory), then the
        // sandbox's own files beside it: the misses before them would mark a directory the sandbox made
        'echo changed > output/lib/code.txt',
        'for i in $(seq 5); do test -e output/lib/f$i; echo x > output/lib/f$i; done',
        'rm output/lib/f1 output/lib/code.txt',
        'cat output/lib/code.txt 2>/dev/null || echo gone; ls output/lib | tr "\\n" " "',
      ].join('\n'),
    );
    expect(r).toMatchObject({ code: 0, stdout: 'gone\nf2 f3 f4 f5 ' });
    expect(await readFile(`${f.lower}/output/lib/code.txt`, 'utf8')).toBe('codebase\n');
    const { changes } = await f.worker.client.request('changes', {});
    expect(changes.filter((c) => c.path === '/output/lib/code.txt').map((c) => c.kind)).toEqual(['deleted']);
    expect(await nativeUnlinkCount(f)).toBe(0);
  }, 60_000);

  it('a symlink in a marked directory is removed as a link, its host target never opened or removed', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN });
    const victim = `${f.lower}/../victim-${String(process.pid)}`;
    await f.host(`echo precious > ${victim}`);
    const r = await f.sandbox(
      [
        'mkdir output/d && for i in $(seq 3); do test -e output/d/f$i; echo x > output/d/f$i; done',
        `ln -s ${victim} output/d/abs && ln -s f2 output/d/rel && rm output/d/f1`,
        'rm output/d/abs output/d/rel && ls output/d | tr "\\n" " "; cat output/d/f2',
      ].join('\n'),
    );
    expect(r).toMatchObject({ code: 0, stdout: 'f2 f3 x\n' });
    expect((await f.host(`cat ${victim}; rm ${victim}`)).stdout).toBe('precious\n');
    // the file went in C, the two links to the worker
    expect(await nativeUnlinkCount(f)).toBe(1);
    expect((await f.worker.client.request('stats', {})).ops.unlink?.count).toBe(2);
  }, 60_000);

  it('while the audit records allowed accesses, every unlink is the worker’s and audited', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN, auditAllowed: true });
    const r = await f.sandbox(
      'mkdir output/d && for i in $(seq 5); do echo x > output/d/f$i; done && rm output/d/f*',
    );
    expect(r.code).toBe(0);
    await f.waitAudit((e) => e.path === '/output/d/f5' && e.op === 'unlink' && e.decision === 'allow', 5000);
    expect(f.audit.filter((e) => e.op === 'unlink' && e.path.startsWith('/output/d/'))).toHaveLength(5);
    expect(await nativeUnlinkCount(f)).toBe(0);
  }, 60_000);
});
