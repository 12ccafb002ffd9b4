// Attack: get a directory's GETATTR answered by the binding (nativeDirAttrs: GETATTRs of directories the
// lookup fast path marked are answered in C, fuse-native/native/fast-create.c) with attributes the worker
// would not give: after a rule change that hides the directory (the worker refuses the GETATTR of a
// hidden node, ENOENT, and audits it), after a checkpoint froze the directory into a frozen
// layer and a chmod made the writable layer's copy (the binding's fd names the frozen one, another
// layer's directory), after the directory was removed while still a cwd, and after a chmod the worker
// made. Defences: every mark carries the generation, which a rule change and a layer change bump before
// they apply (FsCore.setRules, the layer switch), the binding answers no directory whose link count is
// below 2 (a removed one: the worker's orphan answer), and it reads the attributes with an fstat at each
// answer, never from a copy.
import { writeFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, withEnv, type MountedFixture } from '../helpers/worker-fixture.js';
import { nativeCount, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const OPEN = WRITABLE_OUTPUT;
const HIDE_D = [
  ...OPEN,
  { pattern: '/output/d', permission: 'none' as const, priority: 100 },
  { pattern: '/output/d/**', permission: 'none' as const, priority: 100 },
];

function nativeAttrCount(f: MountedFixture): Promise<number> {
  return nativeCount(f, 'attr-native');
}

/**
 * Makes output/d with 20 files (each create is a LOOKUP miss that marks it, then a GETATTR of it) and
 * keeps a host process in it as its cwd until the returned function is called, so the kernel keeps the
 * node (and the mark) across invalidations; checks the binding answered the directory's GETATTRs.
 */
async function markedAndHeld(f: MountedFixture): Promise<() => Promise<void>> {
  const r = await f.sandbox(
    'mkdir output/d && chmod 755 output/d && for i in $(seq 20); do echo x > output/d/f$i; done && stat --cached=never -c %a output/d',
  );
  expect(r).toMatchObject({ code: 0, stdout: '755\n', stderr: '' });
  expect(await nativeAttrCount(f)).toBeGreaterThan(15);
  const flag = join(f.base, 'hold');
  await writeFile(flag, '');
  const held = f.host(`cd output/d && while [ -e ${flag} ]; do sleep 0.05; done`);
  return async () => {
    await rm(flag, { force: true });
    await held;
  };
}

describe('directory GETATTRs answered in the binding: the worker keeps deciding what changed', () => {
  useMountHygiene();

  it('a rule change that hides a marked directory applies to its next GETATTR (refused, audited)', async () => {
    const f = await mountFixture({
      tree: { output: { dir: true }, 'flag/.keep': '' },
      rules: [...OPEN, { pattern: '/flag/**', permission: 'none' as const, priority: 100 }],
      warmupEntries: 0,
    });
    // The sandbox keeps its cwd in the directory across the change (the kernel keeps the node) and asks
    // for its attributes once the rules show /flag.
    const run = f.sandbox(
      [
        'mkdir output/d && cd output/d',
        'for i in $(seq 20); do echo x > f$i; done',
        'stat --cached=never -c %a . > /dev/null && touch /workspace/output/filled',
        'n=0; while [ ! -e /workspace/flag/.keep ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done',
        'stat --cached=never -c %a .; echo $?',
      ].join('\n'),
    );
    const filled = `${f.delta}/upper/output/filled`;
    for (let i = 0; i < 600 && (await f.host(`test -e ${filled}; echo $?`)).stdout !== '0\n'; i++)
      await new Promise((r) => setTimeout(r, 50));
    expect(await nativeAttrCount(f)).toBeGreaterThan(15);
    const before = await nativeAttrCount(f);
    await f.worker.client.request('setRules', { rules: HIDE_D });
    const r = await run;
    expect(r.stdout).toBe('1\n');
    expect(r.stderr).toContain('No such file or directory');
    await f.waitAudit((e) => e.path === '/output/d' && e.decision === 'deny' && e.op === 'getattr', 5000);
    expect(await nativeAttrCount(f)).toBe(before);
  }, 60_000);

  it("after a checkpoint, the writable layer's directory is shown, not the frozen layer's", async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN, warmupEntries: 0 });
    const release = await markedAndHeld(f);
    try {
      await f.worker.client.request('checkpoint', { layerDir: join(f.base, 'layer-1') });
      // the chmod copies the directory up into the new writable layer; the frozen one keeps 755
      const r = await f.sandbox('chmod 700 output/d && stat --cached=never -c %a output/d');
      expect(r).toMatchObject({ code: 0, stdout: '700\n', stderr: '' });
    } finally {
      await release();
    }
  }, 60_000);

  it('a marked directory removed while it is a cwd is answered as the worker answers it', async () => {
    const seen: string[] = [];
    for (const disable of ['', 'nativeDirAttrs']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: OPEN, warmupEntries: 0 }),
      );
      const r = await f.sandbox(
        [
          'mkdir output/e && chmod 700 output/e && cd output/e',
          'test -e x; stat --cached=never -c "%a %h %s %b" .',
          'rmdir ../e && stat --cached=never -c "%a %h %s %b" .',
        ].join('\n'),
      );
      expect(r).toMatchObject({ code: 0, stderr: '' });
      seen.push(r.stdout);
      if (disable === '') expect(await nativeAttrCount(f)).toBeGreaterThanOrEqual(1);
      await f.stop();
    }
    expect(seen[0]).toBe('700 2 4096 8\n755 0 0 0\n');
    expect(seen[1]).toBe(seen[0]);
  }, 60_000);

  it("a chmod and times set by the worker are what the binding's next answer shows", async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN, warmupEntries: 0 });
    const release = await markedAndHeld(f);
    try {
      const before = await nativeAttrCount(f);
      const r = await f.sandbox(
        'chmod 1751 output/d && touch -d @1000000000 output/d && stat --cached=never -c "%a %Y" output/d',
      );
      expect(r).toMatchObject({ code: 0, stdout: '1751 1000000000\n', stderr: '' });
      expect(await nativeAttrCount(f)).toBeGreaterThan(before);
    } finally {
      await release();
    }
  }, 60_000);
});
