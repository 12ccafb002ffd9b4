// A scratch directory for the CLI's system tests: a copy of the demo repository and a data directory.
// After the file's tests the runs' background reapers have finished, nothing is mounted below it any more
// (the test fails otherwise) and it is removed.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, expect } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';
import { waitForReapers } from './reapers.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface CliScratch {
  scratch: string;
  /** A copy of examples/demo-repo. */
  repo: string;
  /** The data directory for `--data`. */
  data: string;
}

/** Registers the file's hooks; the directories are set once its tests start. */
export function useCliScratch(prefix: string): CliScratch {
  const dirs: CliScratch = { scratch: '', repo: '', data: '' };
  beforeAll(async () => {
    dirs.scratch = await mkdtemp(join(tmpdir(), prefix));
    dirs.repo = join(dirs.scratch, 'repo');
    dirs.data = join(dirs.scratch, 'data');
    await execa('cp', ['-a', `${root}examples/demo-repo`, dirs.repo]);
  });
  afterAll(async () => {
    // The runs' sandboxes are removed in the background of their exit.
    expect(await waitForReapers(dirs.data)).toBe(true);
    const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(dirs.scratch));
    await rm(dirs.scratch, { recursive: true, force: true });
    expect(left).toEqual([]);
  });
  return dirs;
}
