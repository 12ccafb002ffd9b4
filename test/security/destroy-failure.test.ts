// A destroy that failed half-way removed the sandbox's record
// first, so the sandbox vanished from `sandbox list` while its delta (and the linked codebase) stayed on
// disk with nothing pointing at them. Now the record goes last: a failed destroy leaves the sandbox
// listed in ERROR with its files, and destroying it again (or the reaper, or `agentfense gc`) finishes.
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { listMounts } from '@agentfense/fuse-worker';

let scratch: string;
let repo: string;
let blocker: string | undefined;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-sec-destroy-'));
  repo = join(scratch, 'repo');
  await mkdir(repo);
  await writeFile(join(repo, 'README.md'), 'hi\n');
});

afterAll(async () => {
  if (blocker !== undefined) await execa('umount', ['-l', blocker], { reject: false });
  const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

describe('a destroy that fails', () => {
  it('leaves the sandbox listed in ERROR with its files, and is retried', async () => {
    const data = join(scratch, 'data');
    await using cp = await ControlPlane.open({ dataDir: data, workerPoolSize: 0 });
    const codebase = await cp.linkCodebase({ path: repo });
    const sb = await cp.createSandbox({ codebaseId: codebase.id, preset: 'full-access' });
    await cp.startSandbox(sb.id);
    const w = await cp.run(sb.id, ['sh', '-c', 'echo result > /workspace/output.txt']);
    expect(w.exitCode).toBe(0);
    await cp.stopSandbox(sb.id);
    // Something the removal cannot take away: a mount point inside the sandbox's directory (rmdir of
    // it fails with EBUSY), as a file system error, a busy mount or a permission problem would.
    const dir = join(data, 'sandboxes', sb.id);
    blocker = join(dir, 'delta', 'busy');
    await mkdir(blocker, { recursive: true });
    await execa('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', blocker]);

    await expect(cp.destroySandbox(sb.id)).rejects.toThrow(/destroying sandbox|EBUSY|busy/i);
    const info = await cp.getSandbox(sb.id);
    expect(info.state).toBe('ERROR');
    expect(info.stateReason).toMatch(/^destroy failed: /);
    expect((await cp.listSandboxes()).items.map((s) => s.id)).toContain(sb.id);
    expect((await stat(dir)).isDirectory()).toBe(true);

    // Once the cause is gone, destroying again finishes the job.
    await execa('umount', [blocker]);
    blocker = undefined;
    await cp.destroySandbox(sb.id);
    expect((await cp.listSandboxes()).items).toEqual([]);
    await expect(stat(dir)).rejects.toThrow(/ENOENT/);
  });
});
