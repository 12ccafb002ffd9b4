// Attacks on the store-ahead (packages/fuse-worker/src/fs/store-ahead.ts): the worker puts files into the
// kernel's page cache before anyone reads them, and a page there is read without asking the worker. So a
// store must never carry what a READ would refuse (a `view` file's bytes), never land on a file the sandbox
// may change (its write could be overwritten with the old bytes), and never hide a read from an audit that
// records allowed accesses.
import { describe, expect, it } from 'vitest';
import type { PermissionRule } from '@agentfense/protocol';
import { AGENT_SAFE, mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';
import type { MountedFixture } from '../helpers/worker-fixture.js';
import { opCount, waitForOps } from '../helpers/store-ahead.js';

/** `dir` with 30 small readable files and, after them in name order, 10 `.view` ones. */
function tree(dir: string): Record<string, string> {
  const t: Record<string, string> = {};
  for (let i = 0; i < 30; i++) t[`${dir}/f${String(i).padStart(2, '0')}.txt`] = `file ${i}\n`;
  for (let i = 0; i < 10; i++) t[`${dir}/v${String(i).padStart(2, '0')}.view`] = `view-only secret ${i}\n`;
  return t;
}

/** Lists `dir`, then reads every readable file in it in listing order: the read-ahead covers the rest. */
async function walk(f: MountedFixture, dir: string): Promise<void> {
  const r = await f.sandbox(
    `ls ${dir} >/dev/null; for n in $(ls -f ${dir} | grep '\\.txt$'); do cat ${dir}/$n >/dev/null; done`,
  );
  expect(r.stderr).toBe('');
}

describe('store-ahead attacks', () => {
  useMountHygiene();

  it("a view file's bytes are never stored: even host root reading through the mount is refused by the worker", async () => {
    const rules: PermissionRule[] = [
      ...AGENT_SAFE,
      { pattern: '/w/*.view', permission: 'view', priority: 60 },
    ];
    const f = await mountFixture({ tree: tree('w'), rules });
    await walk(f, 'w');
    await waitForOps(f, 'readahead', 20);
    // Root skips the mode bits; only a READ reaching the worker stops it, and a stored page would not.
    for (let i = 0; i < 10; i++) {
      const r = await f.host(`cat w/v${String(i).padStart(2, '0')}.view`);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain('Permission denied');
    }
  }, 60_000);

  it('stored from a listing: never a view file, and a rule change right after the listing wins over the stores in flight', async () => {
    const rules: PermissionRule[] = [
      ...AGENT_SAFE,
      { pattern: '/w/*.view', permission: 'view', priority: 60 },
    ];
    // Without the entry warm-up, whose walker could list w/ into the kernel first: the sandbox's `ls w`
    // would then send no listing, and no store from a listing would be tried at all.
    const f = await mountFixture({ tree: { ...tree('a'), ...tree('w') }, rules, warmupEntries: 0 });
    await walk(f, 'a'); // a walker that reads what it lists: the next listing is read ahead
    const stored = await opCount(f, 'store-ahead');
    expect((await f.sandbox('ls w >/dev/null')).stderr).toBe('');
    await waitForOps(f, 'store-ahead', stored + 29); // the .txt files but the probe, none of the .view
    for (let i = 0; i < 10; i++) {
      const r = await f.host(`cat w/v${String(i).padStart(2, '0')}.view`);
      expect(r.stderr).toContain('Permission denied');
    }
    // the same with the rule change racing the stores: list, then at once make two stored files view-only
    const g = await mountFixture({
      tree: { ...tree('a'), ...tree('w') },
      rules: AGENT_SAFE,
      warmupEntries: 0,
    });
    await walk(g, 'a');
    const listed = g.sandbox('ls w >/dev/null');
    await g.worker.client.request('setRules', {
      rules: [...AGENT_SAFE, { pattern: '/w/f0[12].txt', permission: 'view', priority: 60 }],
    });
    await listed;
    for (const n of ['f01', 'f02']) {
      const r = await g.host(`cat w/${n}.txt`);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain('Permission denied');
    }
  }, 60_000);

  it('a file the sandbox may write is never stored (a store could put old bytes back over its write)', async () => {
    const f = await mountFixture({ tree: tree('output/w'), rules: AGENT_SAFE });
    await walk(f, 'output/w');
    await waitForOps(f, 'readahead', 20);
    expect(await opCount(f, 'store-ahead')).toBe(0);
    // and what the sandbox writes is what it reads back
    const r = await f.sandbox('echo mine > output/w/f05.txt && cat output/w/f05.txt');
    expect(r.stdout).toBe('mine\n');
  }, 60_000);

  it('with allowed accesses audited nothing is stored; switching the audit on drops what was stored, so the next read is recorded', async () => {
    const audited = await mountFixture({ tree: tree('w'), rules: AGENT_SAFE, auditAllowed: true });
    await walk(audited, 'w');
    await waitForOps(audited, 'readahead', 20);
    expect(await opCount(audited, 'store-ahead')).toBe(0);

    const f = await mountFixture({ tree: tree('w'), rules: AGENT_SAFE });
    const first = await f.sandbox(
      "ls w >/dev/null; n=$(ls -f w | grep '\\.txt$' | head -n1); cat w/$n >/dev/null; echo $n",
    );
    await waitForOps(f, 'store-ahead', 20);
    const names = (await f.sandbox("ls -f w | grep '\\.txt$'")).stdout.trim().split('\n');
    const target = names.find((n) => n !== first.stdout.trim())!;
    await f.worker.client.request('setAudit', { allowed: true });
    expect((await f.sandbox(`cat w/${target}`)).stdout).toMatch(/^file \d+\n$/);
    await f.waitAudit((e) => e.decision === 'allow' && e.op === 'read' && e.path === `/w/${target}`);
  }, 60_000);
});
