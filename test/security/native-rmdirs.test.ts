// Attack: get an RMDIR answered by the binding (nativeRmdirs: RMDIRs of the sandbox's own empty directories
// in directories only it made are answered in C, fuse-native/native/fast-rmdir.c) where the worker would
// have decided otherwise: after a rule change that makes names in the directory read-only, on a directory
// with something in it, on a directory the codebase gained behind the mount (its merged view is not
// empty), on a directory a checkpoint froze into a layer the sandbox must never change. Each time the
// outcome must be the worker's.
// Defences: a rule change and a layer change revoke every mark before they apply (fast-entries.c's
// generation); the binding checks at each answer that the codebase still lacks the marked directory
// (fast-entries.c current_dir); it reads the directory for an entry before anything is journaled, and a
// failed rmdir(2) journals the add again (the delta keeps knowing the directory as the sandbox's).
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, type MountedFixture } from '../helpers/worker-fixture.js';
import { nativeCount, ruleChangeRace, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const OPEN = WRITABLE_OUTPUT;

function nativeRmdirCount(f: MountedFixture): Promise<number> {
  return nativeCount(f, 'rmdir-native');
}

/** Prints `removed` or `refused: <reason>` for `rmdir <path>`. */
function tryRmdir(path: string): string {
  return `if err=$(rmdir ${path} 2>&1); then echo removed; else echo "refused: \${err##*: }"; fi`;
}

describe('RMDIRs answered in the binding: the worker keeps deciding what is not trivial', () => {
  useMountHygiene();

  it('a rule change that makes names in a directory read-only decides the next rmdir there', async () => {
    const { f, run } = await ruleChangeRace({
      fill: ['for i in $(seq 20); do mkdir e$i; done', 'rmdir e1 e2 e3'],
      after: [tryRmdir('e10')],
    });
    expect(await nativeRmdirCount(f)).toBe(3);
    await f.worker.client.request('setRules', {
      // e10 and its like only: the directory stays writable, so the kernel asks
      rules: [...OPEN, { pattern: '/output/d/e1*', permission: 'read' as const, priority: 100 }],
    });
    const r = await run;
    expect(r.stdout).toBe('refused: Permission denied\n');
    await f.waitAudit((e) => e.path === '/output/d/e10' && e.decision === 'deny', 5000);
    expect(await nativeRmdirCount(f)).toBe(3);
    expect((await f.host(`test -d ${f.delta}/upper/output/d/e10 && echo kept`)).stdout).toBe('kept\n');
  }, 60_000);

  it('a directory with a file in it is refused, and stays the sandbox’s in the change list', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN });
    const r = await f.sandbox(
      [
        'mkdir output/d; test -e output/d/x; mkdir output/d/e output/d/g && echo x > output/d/e/f',
        tryRmdir('output/d/e'),
        tryRmdir('output/d/g'),
        'ls output/d/e',
      ].join('\n'),
    );
    expect(r).toMatchObject({ code: 0, stdout: 'refused: Directory not empty\nremoved\nf\n', stderr: '' });
    expect(await nativeRmdirCount(f)).toBe(1);
    const { changes } = await f.worker.client.request('changes', {});
    expect(changes.map((c) => `${c.kind} ${c.path}`).sort()).toEqual([
      'added /output/d',
      'added /output/d/e',
      'added /output/d/e/f',
    ]);
  }, 60_000);

  it('a directory the codebase gained behind the mount is not empty: refused', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN });
    expect(await f.sandbox('mkdir output/d; test -e output/d/x; mkdir output/d/e output/d/g')).toMatchObject({
      code: 0,
      stderr: '',
    });
    // another sandbox's commit: the codebase now holds output/d/e/code.txt
    await mkdir(join(f.lower, 'output/d/e'), { recursive: true });
    await writeFile(join(f.lower, 'output/d/e/code.txt'), 'codebase\n');
    // past the delta's memory of the codebase lacking it (2 s), so the worker's own answer sees it
    await new Promise((r) => setTimeout(r, 2500));
    const r = await f.sandbox(tryRmdir('output/d/e'));
    expect(r).toMatchObject({ code: 0, stdout: 'refused: Directory not empty\n' });
    expect(await nativeRmdirCount(f)).toBe(0);
    expect((await f.host(`test -d ${f.delta}/upper/output/d/e && echo kept`)).stdout).toBe('kept\n');
  }, 60_000);

  it('a directory a checkpoint froze is whited out, the frozen layer untouched', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN, warmupEntries: 0 });
    expect(await f.sandbox('mkdir output/d; test -e output/d/x; mkdir output/d/e output/d/g')).toMatchObject({
      code: 0,
      stderr: '',
    });
    const layerDir = join(f.base, 'layer-1');
    await f.worker.client.request('checkpoint', { layerDir });
    const r = await f.sandbox(`${tryRmdir('output/d/e')}\nls output/d`);
    expect(r).toMatchObject({ code: 0, stdout: 'removed\ng\n', stderr: '' });
    expect((await f.host(`ls ${layerDir}/upper/output/d`)).stdout).toBe('e\ng\n');
    expect(await nativeRmdirCount(f)).toBe(0);
  }, 60_000);
});
