// `agentfense mount` kept running, reporting nothing, after someone else unmounted its view
// (`umount -l`, `fusermount -u`): a user or a tool relying on it saw an empty directory. It now notices,
// says so, and exits with a failure status.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isFuseMounted, listMounts } from '@agentfense/fuse-worker';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-sec-mount-'));
});

afterAll(async () => {
  const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
  for (const m of left) await execa('umount', ['-l', m.mountpoint], { reject: false });
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

describe('agentfense mount', () => {
  it('exits with a message and a failure status when its mount is removed from outside', async () => {
    const repo = join(scratch, 'repo');
    const target = join(scratch, 'view');
    await mkdir(repo);
    await mkdir(target);
    await writeFile(join(repo, 'a.txt'), 'a\n');
    const child = execa(process.execPath, [bin, 'mount', repo, target, '--preset', 'read-only'], {
      reject: false,
    });
    for (let i = 0; i < 200 && !(await isFuseMounted(target)); i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await isFuseMounted(target)).toBe(true);
    await execa('umount', ['-l', target]);
    const r = await child;
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain('was unmounted from outside');
  });
});
