// `GET /diff` on a 200k-file delta kept the worker busy for 38 s without answering its
// health pings (two missed pings restart the worker), and destroying a sandbox during a big commit ended
// the commit request with a 502. Changes, diff and commit of 100k+ files must keep the worker answering,
// and a stop during a commit must end it between two files with an answer saying what was applied.
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { removeTree } from '@agentfense/fuse-worker';
import { collectParts } from '@agentfense/protocol';
import type { WorkerClient } from '@agentfense/protocol';
import { assertCleanAndRemove, makeDirs } from '../helpers/control-fixtures.js';
import { client, startServer } from '../helpers/http-fixture.js';
import { mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';

/** The control plane's ping timeout: an answer slower than this counts as a missed health check. */
const PING_TIMEOUT_MS = 2000;

/**
 * Writes `files` files of one line under `dir` (500 subdirectories), fast (python, one process); `pad`
 * adds that many characters to each name (longer names: fewer entries per answer part).
 */
function writeFiles(dir: string, files: number, pad = 0): void {
  execFileSync('python3', [
    '-c',
    'import os,sys\nd=sys.argv[1]\npad=sys.argv[3]\nfor i in range(int(sys.argv[2])):\n' +
      "    sub=os.path.join(d,'d%03d'%(i%500))\n    os.makedirs(sub,exist_ok=True)\n" +
      "    with open(os.path.join(sub,'f%06d%s.txt'%(i,pad)),'w') as f: f.write('line %d\\n'%i)\n",
    dir,
    String(files),
    'x'.repeat(pad),
  ]);
}

/** Files (not directories) below `dir`. */
function filesBelow(dir: string): string[] {
  const out = execFileSync('find', [dir, '-type', 'f'], { maxBuffer: 1 << 30 })
    .toString()
    .trim();
  return out === '' ? [] : out.split('\n');
}

/** A delta of `files` added files under /output, written straight into the upper layer (as after a crash). */
async function bigDelta(files: number): Promise<{ base: string; lower: string; delta: string }> {
  const base = await mkdtemp(join(tmpdir(), 'af-long-ops-'));
  const lower = join(base, 'lower');
  const delta = join(base, 'delta');
  await mkdir(join(lower, 'output'), { recursive: true });
  await mkdir(join(delta, 'upper', 'output'), { recursive: true });
  writeFiles(join(delta, 'upper', 'output'), files);
  return { base, lower, delta };
}

/** Pings `stats` every 100 ms while `work` runs; returns the slowest answer. */
async function slowestPing(client: WorkerClient, work: Promise<unknown>): Promise<number> {
  let done = false;
  let slowest = 0;
  const pinger = (async () => {
    while (!done) {
      const t0 = performance.now();
      await client.request('stats', {});
      slowest = Math.max(slowest, performance.now() - t0);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  try {
    await work;
  } finally {
    done = true;
    await pinger;
  }
  return slowest;
}

describe('long operations on a 100k-file delta', () => {
  useMountHygiene();

  it('a commit keeps answering pings; a stop during it ends it between two files and answers what was applied', async () => {
    // Fewer files: each one is copied, renamed into place and recorded (the ping check needs seconds, not 100k).
    const files = 20_000;
    const { base, lower, delta } = await bigDelta(files);
    try {
      const f = await mountFixture({
        lowerDir: lower,
        deltaDir: delta,
        rules: [{ pattern: '**', permission: 'write' }],
      });
      const committing = f.worker.client.request('commit', { mode: 'detect-conflicts' });
      const slowest = slowestPing(
        f.worker.client,
        (async () => {
          // Let it run for a while, then stop (the control plane's destroy does the same).
          for (;;) {
            const dirs = await readdir(join(lower, 'output'));
            if (dirs.length > 20) break;
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        })(),
      );
      expect(await slowest).toBeLessThan(PING_TIMEOUT_MS);
      const stopping = f.stop();
      const result = await committing;
      await stopping;
      expect(result.interrupted).toMatch(/shutting down/);
      const applied = result.applied.filter((c) => c.type === 'file');
      expect(applied.length).toBeGreaterThan(0);
      expect(applied.length).toBeLessThan(files);
      // Every applied file is complete in the codebase; no temporary commit file is left anywhere.
      for (const c of applied.slice(0, 2000)) {
        const i = Number(/f(\d+)\.txt$/.exec(c.path)?.[1]);
        expect(await readFile(join(lower, c.path), 'utf8')).toBe(`line ${i}\n`);
      }
      const leftovers = execFileSync('find', [lower, '-name', '*.af-commit*']).toString();
      expect(leftovers).toBe('');
      // What was not applied is still in the delta, for a later commit.
      const g = await mountFixture({
        lowerDir: lower,
        deltaDir: delta,
        rules: [{ pattern: '**', permission: 'write' }],
      });
      const rest = await collectParts(await g.worker.client.request('changes', {}), (cursor) =>
        g.worker.client.request('more', { cursor }),
      );
      expect(rest.changes.filter((c) => c.type === 'file').length).toBe(files - applied.length);
      await g.stop();
    } finally {
      await removeTree(base);
    }
  }, 600_000);
});

describe('changes and diff of a 100k-file delta through the control plane', () => {
  it('the worker keeps answering its health pings and other requests; it is never restarted', async () => {
    const files = 100_000;
    const dirs = await makeDirs();
    const cp = await ControlPlane.open({ dataDir: dirs.dataDir });
    try {
      const { id: codebaseId } = await cp.linkCodebase({ path: dirs.repo });
      const { id } = await cp.createSandbox({ codebaseId, preset: 'development' });
      // The delta as a crashed or long session would leave it, written before the worker starts.
      const upper = join(cp.layout.sandbox(id).delta, 'upper', 'output');
      await mkdir(upper, { recursive: true });
      writeFiles(upper, files);
      await cp.startSandbox(id);
      // changes and diff run while other requests come in: a command in the sandbox (FUSE requests to
      // the same worker) and the audit query (a stats request to it), each started after the long one.
      const listing = cp.changes(id);
      const during = async (): Promise<void> => {
        const r = await cp.run(id, 'cat /workspace/README.md; ls /workspace/output | wc -l');
        expect(r.stdout).toBe('# demo\n500\n');
        await cp.audit(id);
      };
      await during();
      const changes = await listing;
      expect(changes.filter((c) => c.type === 'file')).toHaveLength(files);
      const diffing = cp.diff(id);
      await during();
      const { diff } = await diffing;
      expect(diff.split('\n').filter((l) => l.startsWith('+++ ')).length).toBe(files);
      // Two missed 2 s pings restart a worker: none was missed through either walk.
      expect((await cp.getSandbox(id)).restartCount).toBe(0);
      expect((await cp.getSandbox(id)).state).toBe('RUNNING');
      await cp.destroySandbox(id);
    } finally {
      for (const sb of (await cp.listSandboxes()).items) await cp.destroySandbox(sb.id);
      await cp.close();
      await assertCleanAndRemove(dirs);
    }
  }, 600_000);
});

describe('destroy during a commit through the HTTP API', () => {
  // The original report: the commit request ended 502. `pnpm bench:long-ops` runs the same with 200k files
  // (figures in docs/security.md); here fewer, so the commit still runs for seconds under CI load.
  it('the commit request ends 200 saying it was interrupted and listing exactly what it wrote', async () => {
    // 240-character names: an answer part (4 MiB) holds about 4,900 of them, so what was applied by the
    // destroy comes back in several parts, the last ones fetched while the worker is stopping.
    const files = 20_000;
    const pad = 240;
    const destroyAt = 12_000;
    const served = await startServer();
    const call = client(served.url, served.token);
    const codebase = (await call('POST', '/v1/codebases', { name: 'long' })).json as { id: string };
    const output = join(served.dataDir, 'codebases', codebase.id, 'files', 'output');
    await mkdir(output, { recursive: true });
    const created = await call('POST', '/v1/sandboxes', {
      codebase_id: codebase.id,
      permissions: [{ pattern: '**', permission: 'write' }],
    });
    expect(created.status, created.text).toBe(200);
    const id = (created.json as { id: string }).id;
    writeFiles(join(served.dataDir, 'sandboxes', id, 'delta', 'upper', 'output'), files, pad);
    expect((await call('POST', `/v1/sandboxes/${id}/start`)).status).toBe(200);

    const committing = call('POST', `/v1/sandboxes/${id}/commit`, { mode: 'detect-conflicts' });
    // Destroy once the commit has written more files than one answer part holds.
    let settled = false;
    void committing.finally(() => (settled = true));
    while (!settled && filesBelow(output).length < destroyAt) {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const destroyed = await call('DELETE', `/v1/sandboxes/${id}`);
    const committed = await committing;
    expect(destroyed.status, destroyed.text).toBe(200);
    expect(committed.status, committed.text).toBe(200);
    const body = committed.json as { applied: { path: string; type: string }[]; interrupted: string };
    expect(body.interrupted).toMatch(/shutting down/);
    const applied = body.applied.filter((c) => c.type === 'file').map((c) => c.path);
    expect(applied.length).toBeGreaterThanOrEqual(destroyAt);
    expect(applied.length).toBeLessThan(files);
    // The codebase holds exactly the files the answer lists, each complete; no temporary commit file.
    const present = filesBelow(output);
    expect(present.map((p) => p.slice(output.length - '/output'.length)).sort()).toEqual([...applied].sort());
    for (const path of applied.slice(0, 2000)) {
      const i = Number(/f(\d+)x*\.txt$/.exec(path)?.[1]);
      expect(await readFile(join(output, '..', path), 'utf8')).toBe(`line ${i}\n`);
    }
    expect((await call('GET', `/v1/sandboxes/${id}`)).status).toBe(404);
  }, 600_000);
});
