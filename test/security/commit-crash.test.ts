// A crash during a commit never half-writes the codebase for good and never loses the delta. Reported: a
// kill -9 of `agentfense run --commit` while it wrote back ~2,000 files left 3-30 of them in the codebase,
// and the reaper then removed the sandbox with the rest of the work. Now a commit is journalled (an
// fsynced intent before its first write into the codebase): a killed run's reaper finishes the commit,
// and a sandbox whose commit a crash cut short otherwise stays listed, stopped, for `sandbox commit` to
// finish (or `sandbox discard` to give up); nothing removes it by itself.
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import type { ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';
import { waitForReapers } from '../helpers/reapers.js';
import { helperPids, startHelper, stopHelper } from '../helpers/run-helper.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const FILES = 2000;
/** Inside the sandbox: out/f<i>.txt holding "content <i>" for every i. */
const WRITER = `mkdir out && i=0; while [ $i -lt ${FILES} ]; do echo "content $i" > out/f$i.txt; i=$((i + 1)); done`;

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-sec-commit-crash-'));
});

afterAll(async () => {
  for (const dir of await readdir(scratch)) await stopHelper(join(scratch, dir, 'data'));
  for (const dir of await readdir(scratch))
    expect(await waitForReapers(join(scratch, dir, 'data'))).toBe(true);
  const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

/** A codebase and a data directory of their own for one test. */
async function dirs(name: string): Promise<{ repo: string; data: string }> {
  const repo = join(scratch, name, 'repo');
  await mkdir(repo, { recursive: true });
  await writeFile(join(repo, 'README.md'), 'hi\n');
  return { repo, data: join(scratch, name, 'data') };
}

function agentfense(
  args: readonly string[],
  env: Record<string, string> = {},
): ResultPromise<{ reject: false }> {
  return execa(process.execPath, [bin, ...args], { env, reject: false });
}

/** Committed files in the codebase so far (temporary copies not counted). */
async function landed(repo: string): Promise<number> {
  const names = await readdir(join(repo, 'out')).catch(() => [] as string[]);
  return names.filter((n) => /^f\d+\.txt$/.test(n)).length;
}

/**
 * Starts `run --commit` of the writer and resolves once some of its files are in the codebase. Wrapped:
 * an execa child is a promise, which an async function would wait for.
 */
async function runUntilLanded(
  repo: string,
  data: string,
  env: Record<string, string>,
): Promise<{ run: ResultPromise<{ reject: false }> }> {
  const args = ['run', repo, '--data', data, '--preset', 'full-access', '--commit', '--', 'sh', '-c', WRITER];
  const run = agentfense(args, env);
  for (;;) {
    if (run.exitCode !== undefined && run.exitCode !== null)
      throw new Error(`run ended early: ${run.exitCode}`);
    if ((await landed(repo)) >= 3) return { run };
    await sleep(2);
  }
}

/** The worker processes among the children of `pid` (their process title names them). */
async function workersOf(pid: number): Promise<number[]> {
  const children = await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8').catch(() => '');
  const found: number[] = [];
  for (const child of children.split(' ').filter(Boolean).map(Number)) {
    const cmdline = await readFile(`/proc/${child}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.startsWith('agentfense-worker')) found.push(child);
  }
  return found;
}

/** What the codebase holds that it should not, and what it lacks: empty when the commit is whole. */
async function damage(repo: string): Promise<string[]> {
  const found: string[] = [];
  const names = await readdir(join(repo, 'out')).catch(() => [] as string[]);
  for (const name of names) if (!/^f\d+\.txt$/.test(name)) found.push(`stray ${name}`);
  for (let i = 0; i < FILES; i++) {
    const text = await readFile(join(repo, 'out', `f${i}.txt`), 'utf8').catch(() => null);
    if (text !== `content ${i}\n`) found.push(`f${i}.txt: ${JSON.stringify(text)}`);
  }
  return found.slice(0, 5);
}

interface Listed {
  id: string;
  state: string;
  stateReason: string | null;
}

async function listed(data: string): Promise<Listed[]> {
  const list = await agentfense(['sandbox', 'list', '--data', data, '--json']);
  expect(list.exitCode, list.stderr).toBe(0);
  return JSON.parse(list.stdout) as Listed[];
}

describe('a crash during a commit', () => {
  it('kill -9 of `run --commit` half-way: its reaper finishes the commit, nothing is lost', async () => {
    const { repo, data } = await dirs('killed-run');
    const { run } = await runUntilLanded(repo, data, { AGENTFENSE_RUN_HELPER: '0' });
    run.kill('SIGKILL');
    await run;
    // Killed half-way, really: most of the files were not in the codebase yet.
    expect(await landed(repo)).toBeLessThan(FILES);
    expect(await waitForReapers(data, 120_000)).toBe(true);
    // Either the reaper finished the commit, or the sandbox is still there with its changes for the user.
    for (const sandbox of await listed(data)) {
      const commit = await agentfense(['sandbox', 'commit', sandbox.id, '--data', data]);
      expect(commit.exitCode, commit.stderr).toBe(0);
      await agentfense(['sandbox', 'destroy', sandbox.id, '--data', data]);
    }
    expect(await damage(repo)).toEqual([]);
    expect((await readdir(repo)).sort()).toEqual(['README.md', 'out']);
  }, 240_000);

  it('the run helper and its worker killed committing: the sandbox stays listed until `sandbox commit`', async () => {
    const { repo, data } = await dirs('killed-helper');
    // The run helper runs the command and the commit; no reaper is armed for it (the client's is not).
    const on = {
      AGENTFENSE_RUN_HELPER: '1',
      AGENTFENSE_RUN_HELPER_SPARE: '0',
      AGENTFENSE_RUN_HELPER_IDLE: '60',
    };
    await startHelper([bin, 'run', repo, '--data', data, '--', 'true'], data, on);
    const helpers = await helperPids(data);
    // Killed the moment files land, with its worker (a worker left alone notices the end of its control
    // connection only at its next health ping and commits on meanwhile, maybe to the end).
    const { run } = await runUntilLanded(repo, data, on);
    for (const pid of [...helpers, ...(await workersOf(helpers[0] ?? 0))]) process.kill(pid, 'SIGKILL');
    await run;
    expect(await landed(repo)).toBeLessThan(FILES);
    // The next command that opens the data directory recovers the sandbox: kept, stopped, saying why.
    const kept = await listed(data);
    expect(kept).toEqual([
      expect.objectContaining({
        state: 'STOPPED',
        stateReason: expect.stringMatching(/unfinished.*agentfense sandbox commit sb_/) as unknown,
      }),
    ]);
    const id = kept[0]?.id ?? '';
    // `gc` leaves it too.
    const gc = await agentfense(['gc', '--data', data, '--stopped-older-than', '0s']);
    expect(gc.stdout).toContain(`kept 1 sandbox(es) whose commit did not finish: ${id}`);
    const commit = await agentfense(['sandbox', 'commit', id, '--data', data]);
    expect(commit.exitCode, commit.stderr).toBe(0);
    expect(await damage(repo)).toEqual([]);
    expect((await listed(data)).map((s) => s.stateReason)).toEqual(['its unfinished commit was finished']);
    const destroy = await agentfense(['sandbox', 'destroy', id, '--data', data]);
    expect(destroy.exitCode, destroy.stderr).toBe(0);
  }, 240_000);

  it('the worker killed committing: `run` keeps the sandbox and says how to finish the commit', async () => {
    const { repo, data } = await dirs('killed-worker');
    const { run } = await runUntilLanded(repo, data, { AGENTFENSE_RUN_HELPER: '0' });
    for (const pid of await workersOf(run.pid ?? 0)) process.kill(pid, 'SIGKILL');
    const r = await run;
    expect(await landed(repo)).toBeLessThan(FILES);
    expect(r.exitCode).toBe(1);
    const id = /sandbox (sb_[0-9a-f-]+) kept \(stopped\)/.exec(r.stderr)?.[1] ?? '';
    expect(r.stderr).toContain(`\`agentfense sandbox commit ${id}\` finishes the commit`);
    expect((await listed(data)).map((s) => [s.id, s.state])).toEqual([[id, 'STOPPED']]);
    const commit = await agentfense(['sandbox', 'commit', id, '--data', data]);
    expect(commit.exitCode, commit.stderr).toBe(0);
    expect(await damage(repo)).toEqual([]);
    const destroy = await agentfense(['sandbox', 'destroy', id, '--data', data]);
    expect(destroy.exitCode, destroy.stderr).toBe(0);
  }, 240_000);
});
