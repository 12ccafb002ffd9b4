// `--keep` and failed runs piled up linked codebases and stopped sandboxes (8 seen) and
// nothing collected them. `agentfense gc` removes what nothing refers to (orphaned sandbox directories,
// their mounts, unreferenced linked codebase records), reports kept stopped sandboxes instead of hiding
// them, removes old ones when asked, and `--dry-run` removes nothing.
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { listMounts } from '@agentfense/fuse-worker';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;

let scratch: string;
let repo: string;
let data: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-sec-gc-'));
  repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  await mkdir(repo);
  await writeFile(join(repo, 'README.md'), 'hi\n');
});

afterAll(async () => {
  const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
  for (const m of left.reverse()) await execa('umount', ['-l', m.mountpoint], { reject: false });
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

/** `agentfense <command…> --data <data> <rest…>`: --data goes before any `--`. */
const agentfense = (...args: string[]) => {
  const dash = args.indexOf('--');
  const head = dash < 0 ? args : args.slice(0, dash);
  const tail = dash < 0 ? [] : args.slice(dash);
  return execa(process.execPath, [bin, ...head, '--data', data, ...tail], { reject: false });
};

interface Report {
  dryRun: boolean;
  sandboxes: { id: string }[];
  directories: string[];
  mounts: string[];
  codebases: { id: string; path: string }[];
  kept: { id: string; state: string }[];
  errors: unknown[];
}

describe('agentfense gc', () => {
  it('removes orphans, reports kept sandboxes, and removes old stopped ones only when asked', async () => {
    const kept = await agentfense('run', repo, '--keep', '--json', '--', 'true');
    expect(kept.exitCode).toBe(0);
    const keptId = (JSON.parse(kept.stdout) as { sandboxId: string }).sandboxId;
    // What an interrupted destroy of an older version, or a crash, leaves: a directory with no record,
    // with a live mount in it, and a linked codebase no sandbox uses.
    const orphan = join(data, 'sandboxes', 'sb_00000000-0000-4000-8000-000000000001');
    await mkdir(join(orphan, 'mnt'), { recursive: true });
    await execa('mount', ['--bind', join(orphan, 'mnt'), join(orphan, 'mnt')]);
    const plane = await ControlPlane.open({ dataDir: data, workerPoolSize: 0 });
    const linkedId = (await plane.linkCodebase({ path: repo })).id;
    await plane.close();

    const dry = await agentfense('gc', '--dry-run', '--json');
    expect(dry.exitCode).toBe(0);
    const planned = JSON.parse(dry.stdout) as Report;
    expect(planned.dryRun).toBe(true);
    expect(planned.directories).toEqual([orphan]);
    expect(planned.codebases.map((c) => c.id)).toEqual([linkedId]);
    expect((await stat(orphan)).isDirectory()).toBe(true); // dry run: nothing removed

    const done = await agentfense('gc', '--json');
    expect(done.exitCode).toBe(0);
    const report = JSON.parse(done.stdout) as Report;
    expect(report.directories).toEqual([orphan]);
    expect(report.mounts).toEqual([join(orphan, 'mnt')]);
    expect(report.codebases.map((c) => c.id)).toEqual([linkedId]);
    expect(report.kept.map((k) => k.id)).toEqual([keptId]); // reported, not hidden, not removed
    expect(report.errors).toEqual([]);
    expect(await readdir(join(data, 'sandboxes'))).toEqual([keptId]);
    expect((await listMounts()).filter((m) => m.mountpoint.startsWith(data))).toEqual([]);
    expect((await stat(join(repo, 'README.md'))).isFile()).toBe(true); // the linked directory is untouched

    const human = await agentfense('gc');
    expect(human.stdout).toContain('nothing to collect');
    expect(human.stdout).toContain(`kept 1 stopped sandbox(es): ${keptId}`);

    const old = await agentfense('gc', '--stopped-older-than', '0s', '--json');
    expect((JSON.parse(old.stdout) as Report).sandboxes.map((s) => s.id)).toEqual([keptId]);
    const list = await agentfense('sandbox', 'list', '--json');
    expect(JSON.parse(list.stdout)).toEqual([]);
  });
});
