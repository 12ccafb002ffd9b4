// The library's front door (docs/decisions.md "The library's front door shares one control plane per data
// directory"): `Sandbox.fromLocal` calls of one process share one control plane per data directory, opened
// once (concurrent first calls too), kept open for an idle period after the last sandbox and closed after it
// (at once with AGENTFENSE_LIBRARY_IDLE=0, with Sandbox.closeIdle(), or when the process has nothing else to
// do), leaving no process or mount; a request made again takes a spare sandbox started ahead, which sees the
// directory as a fresh one would.
import { spawn } from 'node:child_process';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ControlPlane, Sandbox } from '@agentfense/control';
import {
  assertCleanAndRemove,
  makeDirs,
  mountsUnder,
  pidExists,
  waitFor,
} from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
/** The reserved label of an idle spare (sandboxes/one-shot.ts). */
const SPARE = 'agentfense.spare';

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
      const listed = (await a.controlPlane.listSandboxes()).items.map((s) => s.id);
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
      const workers = [(await a.info()).workerPid, (await b.info()).workerPid, ...idle];
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

  it('a request made again takes a spare started ahead: the directory as it is now, listed and labelled as any', async () => {
    const options = { dataDir: dirs.dataDir, labels: { task: 'triage' } };
    const first = await Sandbox.fromLocal(dirs.repo, options);
    const cp = first.controlPlane;
    await first.destroy();
    await (await Sandbox.fromLocal(dirs.repo, options)).destroy();
    // The second identical request's destroy started a spare: running, but not listed while idle.
    const spare = await waitFor('a spare sandbox', async () =>
      (await cp.listSandboxes({ labels: { [SPARE]: 'true' } })).items.find((s) => s.state === 'RUNNING'),
    );
    expect((await cp.listSandboxes()).items).toEqual([]);
    // The directory changes after the spare's mount: what the next sandbox sees is the directory now.
    await writeFile(join(dirs.repo, 'README.md'), '# changed after the spare started\n');
    await writeFile(join(dirs.repo, 'src', 'new.py'), 'x = 1\n');
    await rm(join(dirs.repo, 'docs'), { recursive: true });
    const took = await Sandbox.fromLocal(dirs.repo, options);
    try {
      expect(took.id).toBe(spare.id);
      expect((await took.info()).labels).toEqual({ task: 'triage' });
      expect((await cp.listSandboxes()).items.map((s) => s.id)).toEqual([took.id]);
      const r = await took.run(
        'cat /workspace/README.md; ls /workspace; ls /workspace/src; cat /workspace/.env',
      );
      expect(r.stdout).toBe(
        '# changed after the spare started\nREADME.md\nconfig\noutput\nsrc\napp.py\nnew.py\nutil.py\n',
      );
      expect(r.stderr).toContain('/workspace/.env: No such file or directory');
    } finally {
      await took.destroy();
    }
    // Another request does not take the next spare (made after that destroy); the spare goes.
    const next = await waitFor('the next spare', async () =>
      (await cp.listSandboxes({ labels: { [SPARE]: 'true' } })).items.find((s) => s.state === 'RUNNING'),
    );
    const other = await Sandbox.fromLocal(dirs.repo, { ...options, preset: 'read-only' });
    try {
      expect(other.id).not.toBe(next.id);
      await waitFor('the unused spare removed', async () =>
        (await cp.listSandboxes({ labels: { [SPARE]: 'true' } })).items.length === 0 ? true : undefined,
      );
    } finally {
      await other.destroy();
    }
  });

  it('a process that ends after its last destroy exits at once, leaving no sandbox, process or mount', async () => {
    // Three identical requests: the third one's destroy leaves a spare, and the pool an idle worker.
    const program = `
import { Sandbox } from '@agentfense/control';
const pids = [];
for (let i = 0; i < 3; i++) {
  const sb = await Sandbox.fromLocal(process.argv[1], { dataDir: process.argv[2] });
  if ((await sb.run('true')).exitCode !== 0) process.exit(3);
  pids.push((await sb.info()).workerPid, ...sb.controlPlane.idleWorkerPids);
  const cp = sb.controlPlane;
  await sb.destroy();
  if (i === 2) {
    const spares = async () => (await cp.listSandboxes({ labels: { '${SPARE}': 'true' } })).items;
    while (!(await spares()).some((s) => s.state === 'RUNNING')) await new Promise((r) => setTimeout(r, 50));
    for (const s of await spares()) pids.push(s.workerPid);
  }
}
console.log(JSON.stringify(pids.filter((p) => p !== null)));
`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', program, dirs.repo, dirs.dataDir], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      // Far longer than the test waits: the exit must come from the process running out of work.
      env: { ...process.env, AGENTFENSE_LIBRARY_IDLE: '600' },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(err).toBe('');
    expect(status).toBe(0);
    const pids = JSON.parse(out) as number[];
    expect(pids.length).toBeGreaterThanOrEqual(4);
    for (const pid of pids) expect(pidExists(pid)).toBe(false);
    expect(await mountsUnder(dirs.root)).toEqual([]);
    // The spare went with it: nothing is left in the data directory, listed or not.
    const cp = await ControlPlane.open({ dataDir: dirs.dataDir });
    try {
      expect((await cp.listSandboxes({ labels: { [SPARE]: 'true' } })).items).toEqual([]);
      expect((await cp.listSandboxes()).items).toEqual([]);
    } finally {
      await cp.close();
    }
  }, 120_000);

  it('an idle spare whose process was killed is removed by the next control plane to open the directory', async () => {
    const program = `
import { Sandbox } from '@agentfense/control';
for (let i = 0; i < 2; i++) {
  const sb = await Sandbox.fromLocal(process.argv[1], { dataDir: process.argv[2] });
  const cp = sb.controlPlane;
  await sb.destroy();
  if (i === 1) {
    while (!(await cp.listSandboxes({ labels: { '${SPARE}': 'true' } })).items.some((s) => s.state === 'RUNNING'))
      await new Promise((r) => setTimeout(r, 50));
    process.kill(process.pid, 'SIGKILL');
  }
}
`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', program, dirs.repo, dirs.dataDir], {
      cwd: root,
      stdio: 'ignore',
    });
    const signal = await new Promise<NodeJS.Signals | null>((resolve) =>
      child.on('close', (_code, sig) => resolve(sig)),
    );
    expect(signal).toBe('SIGKILL');
    const cp = await ControlPlane.open({ dataDir: dirs.dataDir });
    try {
      expect((await cp.listSandboxes({ labels: { [SPARE]: 'true' } })).items).toEqual([]);
      expect(await mountsUnder(dirs.dataDir)).toEqual([]);
    } finally {
      await cp.close();
    }
  }, 120_000);
});
