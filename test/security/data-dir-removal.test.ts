// `rm -rf` of a data directory right after a one-shot `run`: the run helper it left behind (a root
// process) and the spare sandbox it keeps started hold a tmpfs and a FUSE mount inside that directory, so
// rm fails with EBUSY there. The helper used to notice only much later, tear the spare down through a
// destroy that made the trash directory again, and its worker pool made logs/ again: the data directory
// came back (and a tmpfs could stay mounted for good). Now the helper sees the removal (its database is
// gone), unmounts the spare, removes only the spare's own directory and exits; nothing is made again, so
// a second `rm -rf` finishes the job and the directory stays gone.
//
// Real processes: two runs (the first in-process, leaving the helper; the second through it, leaving a
// spare), then `rm -rf` twice: once the spare is mounted, and once at once after the run (the spare being
// started meanwhile).
import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';
import { scratch } from '../helpers/http-fixture.js';
import { helperListening, helperPids, stopHelper, until } from '../helpers/run-helper.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
/** The helper on, with its spare sandbox (the default a user gets). */
const HELPER = { AGENTFENSE_RUN_HELPER: '1', AGENTFENSE_RUN_HELPER_IDLE: '60' };

/** Every path under `dir` (itself included), or [] when it is gone. */
async function pathsUnder(dir: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (path: string): Promise<void> => {
    found.push(path);
    for (const name of await readdir(path).catch(() => [] as string[])) await walk(join(path, name));
  };
  if ((await stat(dir).catch(() => undefined)) !== undefined) await walk(dir);
  return found.sort();
}

const mountsUnder = async (dir: string): Promise<string[]> =>
  (await listMounts()).map((m) => m.mountpoint).filter((m) => m.startsWith(`${dir}/`));

/** Two runs over `repo`: the first leaves the helper, the second (through it) leaves a spare. */
async function twoRuns(repo: string, data: string): Promise<void> {
  const run = () =>
    execa(process.execPath, [bin, 'run', repo, '--data', data, '--', 'true'], { env: HELPER, reject: false });
  const first = await run();
  expect(first.exitCode, first.stderr).toBe(0);
  await until('the run helper to listen', () => helperListening(data));
  const second = await run();
  expect(second.exitCode, second.stderr).toBe(0);
}

/** rm -rf `data`, then what the helper does about it: it must exit, unmount, and make nothing again. */
async function removeAndCheck(data: string): Promise<void> {
  await execa('rm', ['-rf', data], { reject: false }); // EBUSY on a mount is what a user sees
  const leftByRm = await pathsUnder(data);
  await until('the run helper to exit', async () => (await helperPids(data)).length === 0, 30_000);
  expect(await mountsUnder(data)).toEqual([]);
  // Nothing made again: what is there is a part of what rm could not remove.
  const now = await pathsUnder(data);
  expect(now.filter((p) => !leftByRm.includes(p))).toEqual([]);
  // A second rm finishes the job, and the directory stays gone.
  const again = await execa('rm', ['-rf', data], { reject: false });
  expect(again.exitCode, again.stderr).toBe(0);
  await sleep(1500);
  expect(await pathsUnder(data)).toEqual([]);
}

describe('agentfense gc --all-helpers', () => {
  it('stops the run helper and its spare at once, so the data directory can be removed', async () => {
    const dir = await scratch('af-data-removal-');
    const repo = join(dir, 'repo');
    await mkdir(repo);
    const data = join(dir, 'data');
    try {
      await twoRuns(repo, data);
      await until('the spare to be mounted', async () => (await mountsUnder(data)).length > 0);
      const [pid] = await helperPids(data);
      const dry = await execa(process.execPath, [bin, 'gc', '--all-helpers', '--dry-run', '--data', data]);
      expect(dry.stdout).toContain(`would stop run helper ${String(pid)}`);
      expect(await helperPids(data)).toEqual([pid]);
      const gc = await execa(process.execPath, [bin, 'gc', '--all-helpers', '--data', data], {
        reject: false,
      });
      expect(gc.exitCode, gc.stderr).toBe(0);
      expect(gc.stdout).toContain(`stopped run helper ${String(pid)}`);
      expect(await helperPids(data)).toEqual([]);
      expect(await mountsUnder(data)).toEqual([]);
      const removed = await execa('rm', ['-rf', data], { reject: false });
      expect(removed.exitCode, removed.stderr).toBe(0);
    } finally {
      await stopHelper(data);
      await rm(data, { recursive: true, force: true });
    }
  });
});

describe('rm -rf of a data directory right after a run', () => {
  it('leaves no mount and makes nothing again, the spare mounted or being started', async () => {
    const dir = await scratch('af-data-removal-');
    const repo = join(dir, 'repo');
    await mkdir(repo);
    await writeFile(join(repo, 'a.txt'), 'a\n');
    const mounted = join(dir, 'data-mounted');
    const starting = join(dir, 'data-starting');
    try {
      await twoRuns(repo, mounted);
      // The spare is up: its mounts are in the data directory.
      await until('the spare to be mounted', async () => (await mountsUnder(mounted)).length > 0);
      await removeAndCheck(mounted);

      await twoRuns(repo, starting);
      await removeAndCheck(starting); // at once: the spare is being linked, created and started
    } finally {
      // A failed check must not leave a helper or a mount behind.
      for (const data of [mounted, starting]) {
        await stopHelper(data);
        for (const m of (await mountsUnder(data)).reverse())
          await execa('umount', ['-l', m], { reject: false });
        await rm(data, { recursive: true, force: true });
      }
    }
  });
});
