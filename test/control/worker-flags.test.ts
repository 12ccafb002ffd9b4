// Every worker the control plane starts — on demand and from its pool — runs the bundled worker program with
// the memory flags the fs bench measured (docs/decisions.md, "Every worker runs with the same V8 flags and
// one malloc arena"): one spawn path for all of them. Each worker says what it runs in its 'worker ready' log
// line.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { WORKER_BUNDLE, WORKER_NODE_FLAGS } from '@agentfense/fuse-worker';
import { assertCleanAndRemove, makeDirs, waitFor } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

interface LogEntry {
  readonly msg: string;
  readonly pid: number;
  readonly execArgv?: string[];
  readonly program?: string;
}

/** The 'worker ready' line of worker `pid`, from any of the logs a worker starts in. */
async function readyLine(logFiles: readonly string[], pid: number): Promise<LogEntry | undefined> {
  for (const logFile of logFiles) {
    const text = await readFile(logFile, 'utf8').catch(() => '');
    const entry = text
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as LogEntry)
      .find((e) => e.msg === 'worker ready' && e.pid === pid);
    if (entry !== undefined) return entry;
  }
  return undefined;
}

describe('the worker program', () => {
  it('does not load the crypto module (OpenSSL: ~0.7 MiB of private memory in every worker)', async () => {
    const program = await readFile(WORKER_BUNDLE, 'utf8');
    expect(program).not.toMatch(/from\s*["'](node:)?crypto["']|require\(["'](node:)?crypto["']\)/);
  });
});

describe('worker processes started by the control plane', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;

  beforeAll(async () => {
    dirs = await makeDirs();
    cp = await ControlPlane.open({ dataDir: dirs.dataDir, reapIntervalMs: 0 });
  });
  afterAll(async () => {
    await cp.close();
    await assertCleanAndRemove(dirs);
  });

  it('run the bundled worker with the measured V8 flags and malloc tuning, on demand and from the pool', async () => {
    const { id: codebaseId } = await cp.linkCodebase({ path: dirs.repo });
    const first = await cp.createSandbox({ codebaseId, preset: 'agent-safe' });
    await cp.startSandbox(first.id);
    const onDemand = cp.sandboxes.workerPid(first.id);
    expect(onDemand).toBeTypeOf('number');
    const [pooled] = await waitFor(
      'a pooled worker',
      () => {
        const pids = cp.sandboxes.idleWorkerPids;
        return pids.length > 0 ? pids : undefined;
      },
      30_000,
    );
    // A worker logs 'worker ready' where it was spawned to: the pool's log, or its sandbox's.
    const logs = [
      join(dirs.dataDir, 'logs', 'worker-pool.log'),
      join(dirs.dataDir, 'sandboxes', first.id, 'worker.log'),
    ];
    const ready = [
      await waitFor('the on-demand worker to log', () => readyLine(logs, onDemand!)),
      await waitFor('the pooled worker to log', () => readyLine(logs, pooled!)),
    ];
    for (const entry of ready) {
      expect(entry).toMatchObject({ execArgv: [...WORKER_NODE_FLAGS], program: WORKER_BUNDLE });
    }
    expect(WORKER_NODE_FLAGS).toEqual(expect.arrayContaining(['--expose-gc']));
    // And the malloc tuning, in their environment.
    for (const pid of [onDemand!, pooled!]) {
      const environ = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0');
      expect(environ).toEqual(
        expect.arrayContaining(['MALLOC_ARENA_MAX=1', 'MALLOC_MMAP_THRESHOLD_=131072']),
      );
    }
  });
});
