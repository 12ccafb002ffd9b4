// The one-shot CLI's reaper (packages/control/src/cli/reaper.ts) removes sandbox directories marked
// `forgotten` whose record is gone, but not one whose marker's writer is still running: that is the run
// helper tearing a retired sandbox down after its answer, and two removers at once race on its mounts,
// cgroups and files (the loser failed with ENOENT). A marker of a dead writer is removed as before.
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processStartTime } from '@agentfense/protocol';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const reaper = `${root}packages/control/dist/cli/reaper.js`;

let data: string;

beforeAll(async () => {
  data = await mkdtemp(join(tmpdir(), 'af-cli-reaper-'));
  // An initialised data directory (layout, database).
  expect((await execa(process.execPath, [bin, 'sandbox', 'list', '--data', data])).exitCode).toBe(0);
});

afterAll(async () => {
  await rm(data, { recursive: true, force: true });
});

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    () => false,
  );

/** A marked, record-less sandbox directory whose marker names `marker`. */
async function forgotten(id: string, marker: string): Promise<string> {
  const dir = join(data, 'sandboxes', id);
  await mkdir(join(dir, 'delta'), { recursive: true });
  await writeFile(join(dir, 'delta', 'file'), 'x');
  await writeFile(join(dir, 'forgotten'), marker);
  return dir;
}

async function reap(): Promise<void> {
  // --owner: a pid that is not running (the CLI that started the reaper has exited).
  const r = await execa(process.execPath, [reaper, '--data', data, '--owner', '999999999'], {
    reject: false,
  });
  expect(r.exitCode).toBe(0);
}

describe('the reaper and forgotten markers', () => {
  it("leaves a directory whose marker's writer still runs; removes a dead writer's", async () => {
    const alive = await forgotten(
      'sb_00000000-0000-4000-8000-00000000a11e',
      `${process.pid} ${processStartTime(process.pid)}\n`,
    );
    // A pid alive now but with another start time is another process: its writer is gone.
    const reused = await forgotten('sb_00000000-0000-4000-8000-0000000000b0', `${process.pid} 1\n`);
    const old = await forgotten('sb_00000000-0000-4000-8000-0000000000c0', '999999999\n');
    await reap();
    expect(await exists(alive)).toBe(true);
    expect(await exists(reused)).toBe(false);
    expect(await exists(old)).toBe(false);
    // Once its writer is gone, the next reaper takes it.
    await writeFile(join(alive, 'forgotten'), '999999999 1\n');
    await reap();
    expect(await exists(alive)).toBe(false);
  });
});
