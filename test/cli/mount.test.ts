// `agentfense mount` as a user runs it: foreground view of a directory, SIGINT/SIGTERM unmount cleanly,
// --delta keeps changes across runs, bad input is refused before anything is mounted.
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import type { ResultPromise } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { isFuseMounted } from '@agentfense/fuse-worker';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const demo = `${root}examples/demo-repo`;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function scratch(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'af-cli-mount-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Starts `agentfense mount` and resolves once it says the view is mounted. */
// Wrapped in an object: returning the (thenable) subprocess from an async function would await its exit.
async function startMount(args: string[]): Promise<{ child: ResultPromise<{ reject: false; all: true }> }> {
  const child = execa(process.execPath, [bin, 'mount', ...args], { reject: false, all: true });
  cleanups.push(async () => {
    child.kill('SIGTERM');
    await child;
  });
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    child.all.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      if (seen.includes('Ctrl-C unmounts')) resolve();
    });
    void child.then((r) => reject(new Error(`mount exited early (${r.exitCode}): ${r.all}`)));
  });
  return { child };
}

describe('agentfense mount', () => {
  it('serves the agent-safe view and unmounts on SIGINT with status 0', async () => {
    const mnt = join(await scratch(), 'mnt');
    await mkdir(mnt);
    const { child } = await startMount([demo, mnt]);
    expect((await readdir(mnt)).sort()).toEqual(['README.md', 'config', 'docs', 'output', 'src']);
    await expect(readFile(join(mnt, 'secrets/deploy.pem'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await readFile(join(mnt, 'src/app.py'), 'utf8')).toContain('def');
    child.kill('SIGINT');
    const result = await child;
    expect(result.exitCode).toBe(0);
    expect(result.all).toContain('SIGINT: unmounting');
    expect(await isFuseMounted(mnt)).toBe(false);
  });

  it('keeps changes in --delta across runs and never touches the codebase', async () => {
    const dir = await scratch();
    const mnt = join(dir, 'mnt');
    await mkdir(mnt);
    const delta = join(dir, 'delta');
    let { child } = await startMount([demo, mnt, '--delta', delta]);
    await writeFile(join(mnt, 'output/note.txt'), 'kept\n');
    child.kill('SIGTERM');
    expect((await child).exitCode).toBe(0);
    await expect(readFile(join(demo, 'output/note.txt'))).rejects.toMatchObject({ code: 'ENOENT' });

    ({ child } = await startMount([demo, mnt, '--delta', delta]));
    expect(await readFile(join(mnt, 'output/note.txt'), 'utf8')).toBe('kept\n');
    child.kill('SIGTERM');
    expect((await child).exitCode).toBe(0);
    expect(await isFuseMounted(mnt)).toBe(false);
  });

  it('--disk caps the delta (ENOSPC past it) and a bad size is refused with status 2', async () => {
    const dir = await scratch();
    const mnt = join(dir, 'mnt');
    await mkdir(mnt);
    const bad = await execa(process.execPath, [bin, 'mount', demo, mnt, '--disk', 'lots'], { reject: false });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toMatch(/--disk "lots": expected a size such as 512M/);
    const { child } = await startMount([demo, mnt, '--disk', '1M']);
    await writeFile(join(mnt, 'output/small.bin'), Buffer.alloc(256 * 1024));
    await expect(writeFile(join(mnt, 'output/big.bin'), Buffer.alloc(2 * 1024 * 1024))).rejects.toMatchObject(
      {
        code: 'ENOSPC',
      },
    );
    child.kill('SIGTERM');
    expect((await child).exitCode).toBe(0);
  });

  it('refuses a non-empty mountpoint and a missing directory with status 2', async () => {
    const dir = await scratch();
    await writeFile(join(dir, 'file'), 'x');
    const busy = await execa(process.execPath, [bin, 'mount', demo, dir], { reject: false });
    expect(busy.exitCode).toBe(2);
    expect(busy.stderr).toBe(`agentfense: mountpoint ${dir} is not empty`);
    const missing = await execa(process.execPath, [bin, 'mount', join(dir, 'nope'), dir], { reject: false });
    expect(missing.exitCode).toBe(2);
    expect(missing.stderr).toBe(`agentfense: codebase directory ${join(dir, 'nope')} does not exist`);
    expect(await isFuseMounted(dir)).toBe(false);
  });
});
