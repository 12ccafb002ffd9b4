// Sandbox records: labels and filters, pagination, and expiry by the reaper.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ControlPlane } from '@agentfense/control';
import { InvalidArgumentError } from '@agentfense/protocol';
import { closePlane, openPlaneOverExample, waitFor } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

describe('sandbox listing and expiry', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let codebaseId: string;

  beforeAll(async () => {
    ({ dirs, cp, codebaseId } = await openPlaneOverExample({ reapIntervalMs: 200 }));
  });
  afterAll(async () => {
    await closePlane(cp, dirs);
  });

  it('filters by labels and state and pages through results', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(
        (await cp.createSandbox({ codebaseId, labels: { team: i % 2 === 0 ? 'even' : 'odd', n: String(i) } }))
          .id,
      );
    }
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await cp.listSandboxes({
        pageSize: 2,
        ...(token === undefined ? {} : { pageToken: token }),
      });
      seen.push(...page.items.map((s) => s.id));
      token = page.nextPageToken ?? undefined;
      pages++;
    } while (token !== undefined);
    expect(pages).toBe(3);
    expect(seen).toEqual(ids);
    expect((await cp.listSandboxes({ labels: { team: 'even' } })).items.map((s) => s.labels.n)).toEqual([
      '0',
      '2',
      '4',
    ]);
    expect((await cp.listSandboxes({ labels: { team: 'odd', n: '3' } })).items.map((s) => s.id)).toEqual([
      ids[3],
    ]);
    expect((await cp.listSandboxes({ state: 'RUNNING' })).items).toEqual([]);
    expect((await cp.listSandboxes({ state: 'PENDING', codebaseId })).items).toHaveLength(5);
    await expect(cp.listSandboxes({ pageToken: 'garbage' })).rejects.toThrow(InvalidArgumentError);
    await expect(cp.listSandboxes({ pageSize: 0 })).rejects.toThrow(InvalidArgumentError);
    for (const id of ids) await cp.destroySandbox(id);
  });

  it("a run helper's spare is internal: unlisted until claimed, then listed with the caller's labels", async () => {
    // As the run helper does: a codebase linked for the spare alone.
    const own = await cp.linkCodebase({ path: dirs.repo });
    const spare = await cp.createSandbox(
      { codebaseId: own.id, labels: { team: 'spare-test' } },
      { spare: true },
    );
    const plain = await cp.createSandbox({ codebaseId, labels: { team: 'spare-test' } });
    const codebases = async () => (await cp.listCodebases()).map((c) => c.id);
    const listed = async (labels?: Record<string, string>) =>
      (await cp.listSandboxes(labels === undefined ? {} : { labels })).items.map((s) => s.id);
    // Idle: in no listing, unless the caller filters on the reserved key.
    expect(await listed()).toEqual([plain.id]);
    expect(await listed({ team: 'spare-test' })).toEqual([plain.id]);
    expect((await cp.listSandboxes({ state: 'PENDING', codebaseId })).items.map((s) => s.id)).toEqual([
      plain.id,
    ]);
    expect(await listed({ 'agentfense.spare': 'true' })).toEqual([spare.id]);
    expect(await listed({ 'agentfense.spare': 'true', team: 'spare-test' })).toEqual([spare.id]);
    expect((await cp.getSandbox(spare.id)).labels).toEqual({
      team: 'spare-test',
      'agentfense.spare': 'true',
    });
    expect(await codebases()).toEqual([codebaseId]);
    expect((await cp.getCodebase(own.id)).id).toBe(own.id);
    // Claimed: listed as any sandbox, its labels the caller's, and the label index agrees.
    expect(await cp.claimSpareSandbox(spare.id)).toBe(true);
    expect(await listed()).toEqual([spare.id, plain.id]);
    expect(await listed({ team: 'spare-test' })).toEqual([spare.id, plain.id]);
    expect(await listed({ 'agentfense.spare': 'true' })).toEqual([]);
    expect((await cp.getSandbox(spare.id)).labels).toEqual({ team: 'spare-test' });
    expect(await codebases()).toEqual([codebaseId, own.id]);
    expect(await cp.claimSpareSandbox(spare.id)).toBe(false);
    expect(await cp.claimSpareSandbox(plain.id)).toBe(false);
    for (const id of [spare.id, plain.id]) await cp.destroySandbox(id);
    await cp.deleteCodebase(own.id);
  });

  it('refuses the reserved spare label from callers, naming it', async () => {
    await expect(cp.createSandbox({ codebaseId, labels: { 'agentfense.spare': 'true' } })).rejects.toThrow(
      /label key agentfense\.spare is reserved for the run helper's spare sandboxes; use another key/,
    );
    await expect(cp.createSandbox({ codebaseId, labels: { 'agentfense.spare': 'x' } })).rejects.toThrow(
      InvalidArgumentError,
    );
    expect((await cp.listSandboxes({ labels: { 'agentfense.spare': 'true' } })).items).toEqual([]);
    expect((await cp.listSandboxes()).items).toEqual([]);
  });

  it('rejects invalid create options clearly', async () => {
    await expect(cp.createSandbox({ codebaseId, runtime: 'qemu' })).rejects.toThrow(/unknown runtime "qemu"/);
    await expect(cp.createSandbox({ codebaseId, expiresIn: -1 })).rejects.toThrow(/expiresIn/);
    await expect(cp.createSandbox({ codebaseId, env: { 'BAD NAME': 'x' } })).rejects.toThrow(/environment/);
    await expect(cp.createSandbox({ codebaseId, preset: 'nope' })).rejects.toThrow(/nope/);
    await expect(cp.createSandbox({ codebaseId: 'cb_00000000-0000-4000-8000-000000000000' })).rejects.toThrow(
      /not found/,
    );
    expect((await cp.listSandboxes()).items).toEqual([]);
  });

  it('destroys expired sandboxes, running or not', async () => {
    const idle = await cp.createSandbox({ codebaseId, expiresIn: 0.3 });
    const busy = await cp.createSandbox({ codebaseId, expiresIn: 1 });
    await cp.startSandbox(busy.id);
    const keep = await cp.createSandbox({ codebaseId });
    expect(idle.expiresAt).not.toBeNull();
    await waitFor(
      'the reaper',
      async () => ((await cp.listSandboxes()).items.length === 1 ? true : undefined),
      10_000,
    );
    expect((await cp.listSandboxes()).items.map((s) => s.id)).toEqual([keep.id]);
    await cp.destroySandbox(keep.id);
  });
});
