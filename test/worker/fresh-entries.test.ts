// A listing sends the names whose entry and attributes the kernel holds fresh as plain entries
// (freshEntries, packages/fuse-worker/src/fs/entry-freshness.ts): a `find` over a tree just written costs
// the worker no LOOKUP answer per file. What a user checks: the walk and `ls -l` show exactly what is
// there, sizes included after writes; a hidden name never shows; a rule change still wins at once; and the
// switch turns it off.
import { describe, expect, it } from 'vitest';
import { AGENT_SAFE, mountFixture, useMountHygiene, type MountedFixture } from '../helpers/worker-fixture.js';
import { opCount } from '../helpers/store-ahead.js';

const FILES = 40;

/** Creates output/t with FILES empty files (CREATE only: the kernel holds each entry fresh). */
async function makeTree(f: MountedFixture): Promise<void> {
  const r = await f.sandbox(`mkdir -p output/t && for i in $(seq 1 ${FILES}); do : > output/t/f$i; done`);
  expect(r.stderr).toBe('');
}

describe('plain entries for names the kernel holds fresh', () => {
  useMountHygiene();

  it('find over files just created sends them plain, and every listing still shows what is there', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE });
    expect((await f.worker.client.request('stats', {})).fuse?.features.freshEntries).toBe(true);
    await makeTree(f);
    const before = await opCount(f, 'plain-entry');
    const found = await f.sandbox('find output/t -type f | wc -l');
    expect(found.stdout).toBe(`${FILES}\n`);
    expect((await opCount(f, 'plain-entry')) - before).toBeGreaterThanOrEqual(FILES);
    // A write makes the kernel's attributes stale: the next listing carries the new size.
    expect((await f.sandbox('printf hello > output/t/f1 && ls -l output/t/f1')).stdout).toMatch(/ 5 /);
    expect((await f.sandbox('ls -l output/t | grep -c " f"')).stdout).toBe(`${FILES}\n`);
    expect((await f.sandbox('wc -c < output/t/f1')).stdout.trim()).toBe('5');
  }, 60_000);

  it('a rule change hides a name the kernel held fresh: it leaves every listing and every lookup at once', async () => {
    // a codebase file hidden by AGENT_SAFE (*.key: none) beside the new ones: never listed, never found
    const f = await mountFixture({ tree: { 'output/t/f0.key': 'secret\n' }, rules: AGENT_SAFE });
    await makeTree(f);
    const before = await opCount(f, 'plain-entry');
    expect((await f.sandbox('ls -a output/t | grep -c key; cat output/t/f0.key')).stdout).toBe('0\n');
    expect((await f.sandbox('find output/t -type f | wc -l')).stdout).toBe(`${FILES}\n`);
    expect(await opCount(f, 'plain-entry')).toBeGreaterThan(before);
    await f.worker.client.request('setRules', {
      rules: [...AGENT_SAFE, { pattern: '/output/t/f3', permission: 'none', priority: 200 }],
    });
    const r = await f.sandbox(
      'find output/t -type f | grep -c "/f3$" || true; cat output/t/f3 2>&1; stat output/t/f3 2>&1 | head -n1',
    );
    expect(r.stdout).toMatch(/^0\n.*No such file or directory\n.*No such file or directory\n$/);
  }, 60_000);

  it('AGENTFENSE_FUSE_DISABLE=freshEntries sends every entry in full', async () => {
    const previous = process.env.AGENTFENSE_FUSE_DISABLE;
    process.env.AGENTFENSE_FUSE_DISABLE = 'freshEntries';
    let f: MountedFixture;
    try {
      f = await mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE });
    } finally {
      if (previous === undefined) delete process.env.AGENTFENSE_FUSE_DISABLE;
      else process.env.AGENTFENSE_FUSE_DISABLE = previous;
    }
    const fuse = (await f.worker.client.request('stats', {})).fuse;
    expect(fuse?.features.freshEntries).toBe(false);
    expect(fuse?.disabled).toContain('freshEntries');
    await makeTree(f);
    expect((await f.sandbox('find output/t -type f | wc -l')).stdout).toBe(`${FILES}\n`);
    expect(await opCount(f, 'plain-entry')).toBe(0);
  }, 60_000);
});
