// The library's front door (docs/decisions.md "The library's front door"): `Sandbox.fromLocal` calls of one
// process share one control plane per data directory, opened once (concurrent first calls too), kept open
// for an idle period after the last sandbox and closed after it (at once with AGENTFENSE_LIBRARY_IDLE=0,
// with Sandbox.closeIdle(), or when the process has nothing else to do), leaving no process or mount.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ControlPlane, Sandbox } from '@agentfense/control';
import { assertCleanAndRemove, makeDirs, mountsUnder, pidExists, waitFor } from './fixtures.js';
import type { TestDirs } from './fixtures.js';

/** How many times a control plane opened the data directory (its log's "control plane open" records). */
async function opens(dataDir: string): Promise<number> {
  const log = await readFile(join(dataDir, 'logs', 'control.log'), 'utf8');
  return log.split('\n').filter((line) => line.includes('"msg":"control plane open"')).length;
}

/** Runs `body` with AGENTFENSE_LIBRARY_IDLE set to `seconds`, restoring what was there. */
async function withIdle<T>(seconds: string, body: () => Promise<T>): Promise<T> {
  const saved = process.env.AGENTFENSE_LIBRARY_IDLE;
  process.env.AGENTFENSE_LIBRARY_IDLE = seconds;
  try {
    return await body();
  } finally {
    if (saved === undefined) delete process.env.AGENTFENSE_LIBRARY_IDLE;
    else process.env.AGENTFENSE_LIBRARY_IDLE = saved;
  }
}

describe('Sandbox.fromLocal without a control plane', () => {
  let dirs: TestDirs;
  beforeEach(async () => {
    dirs = await makeDirs();
  });
  afterEach(async () => {
    await Sandbox.closeIdle();
    await assertCleanAndRemove(dirs);
  });

  it('shares one control plane per data directory, opened once; another directory or an explicit one is apart', async () => {
    const a = await Sandbox.fromLocal(dirs.repo, { dataDir: dirs.dataDir });
    const b = await Sandbox.fromLocal(dirs.repo, { dataDir: dirs.dataDir, preset: 'read-only' });
    const other = await Sandbox.fromLocal(dirs.repo, { dataDir: join(dirs.root, 'other') });
    const own = await ControlPlane.open({ dataDir: join(dirs.root, 'own') });
    const mine = await Sandbox.fromLocal(dirs.repo, { controlPlane: own });
    try {
      expect(b.controlPlane).toBe(a.controlPlane);
      const listed = a.controlPlane.listSandboxes().items.map((s) => s.id);
      expect(listed.sort()).toEqual([a.id, b.id].sort());
      expect(await opens(dirs.dataDir)).toBe(1);
      expect(other.controlPlane).not.toBe(a.controlPlane);
      expect(mine.controlPlane).toBe(own);
    } finally {
      for (const sb of [a, b, other, mine]) await sb.destroy();
    }
    // The one passed in is its caller's: destroying its last sandbox leaves it open.
    expect(own.closed).toBe(false);
    expect((await Sandbox.fromLocal(dirs.repo, { controlPlane: own })).controlPlane).toBe(own);
    await own.close();
  });

  it('concurrent first calls open the data directory once, and every sandbox works', async () => {
    const all = await Promise.all(
      [0, 1, 2].map(() => Sandbox.fromLocal(dirs.repo, { dataDir: dirs.dataDir })),
    );
    try {
      expect(new Set(all.map((sb) => sb.controlPlane)).size).toBe(1);
      expect(await opens(dirs.dataDir)).toBe(1);
      const results = await Promise.all(all.map((sb) => sb.run('cat /workspace/README.md')));
      expect(results.map((r) => [r.exitCode, r.stdout])).toEqual(Array(3).fill([0, '# demo\n']));
    } finally {
      await Promise.all(all.map((sb) => sb.destroy()));
    }
  });

  it('with AGENTFENSE_LIBRARY_IDLE=0 the control plane closes with its last sandbox, leaving no process or mount', async () => {
    await withIdle('0', async () => {
      const a = await Sandbox.fromLocal(dirs.repo, { dataDir: dirs.dataDir });
      const b = await Sandbox.fromLocal(dirs.repo, { dataDir: dirs.dataDir });
      const cp = a.controlPlane;
      const idle = await waitFor('a pooled worker', () =>
        cp.idleWorkerPids.length > 0 ? cp.idleWorkerPids : undefined,
      );
      const workers = [a.info().workerPid, b.info().workerPid, ...idle];
      await a.destroy();
      expect(cp.closed).toBe(false);
      expect((await b.run('true')).exitCode).toBe(0);
      await b.destroy();
      expect(cp.closed).toBe(true);
      for (const pid of workers) expect(pidExists(pid ?? 0)).toBe(false);
      expect(await mountsUnder(dirs.root)).toEqual([]);
      const log = await readFile(join(dirs.dataDir, 'logs', 'control.log'), 'utf8');
      expect(log).toContain('"msg":"control plane closed"');
    });
  });

  it('by default the control plane stays open for the next call, and closeIdle() closes it now', async () => {
    const a = await Sandbox.fromLocal(dirs.repo, { dataDir: dirs.dataDir });
    const cp = a.controlPlane;
    await a.destroy();
    expect(cp.closed).toBe(false);
    const b = await Sandbox.fromLocal(dirs.repo, { dataDir: dirs.dataDir });
    expect(b.controlPlane).toBe(cp);
    await b.destroy();
    expect(await opens(dirs.dataDir)).toBe(1);
    const idle = cp.idleWorkerPids;
    await Sandbox.closeIdle();
    expect(cp.closed).toBe(true);
    for (const pid of idle) expect(pidExists(pid)).toBe(false);
    expect(await mountsUnder(dirs.root)).toEqual([]);
  });
});
