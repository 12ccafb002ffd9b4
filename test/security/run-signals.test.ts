// `run` handled no signal, so SIGTERM/SIGINT/SIGHUP killed the CLI with its
// sandbox still there (the command running, a STOPPED or RUNNING record, a `bwrap-etc-…` temporary
// directory); a kill -9 of `run` left its sandbox forever. Now the signal stops the command, removes the
// sandbox and exits 128+N, and a killed run's sandbox is removed by the next invocation's recovery.
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;

let scratch: string;
let repo: string;
let data: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-sec-signals-'));
  repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  await execa('mkdir', ['-p', repo]);
  await writeFile(join(repo, 'README.md'), 'hi\n');
});

afterAll(async () => {
  const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

/** Starts `run -v -- sleep <marker>` and resolves once the command is running inside the sandbox. */
async function startSleeper(marker: string) {
  const child = execa(process.execPath, [bin, 'run', repo, '--data', data, '-v', '--', 'sleep', marker], {
    reject: false,
  });
  let seen = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      if (seen.includes('started (worker mounted')) resolve();
    });
    void child.then(() => reject(new Error(`run ended early: ${seen}`)));
  });
  // The command itself is up once sleep shows in the process table.
  for (let i = 0; i < 100; i++) {
    if ((await execa('pgrep', ['-f', `sleep ${marker}`], { reject: false })).exitCode === 0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const sandboxId = /created (sb_[0-9a-f-]+)/.exec(seen)?.[1];
  if (sandboxId === undefined) throw new Error(`no sandbox id in: ${seen}`);
  // Wrapped: an execa child is a promise, which an async function would wait for.
  return { child, sandboxId };
}

/** The sandbox's cgroup directories still present, in every hierarchy. */
async function cgroupsOf(sandboxId: string): Promise<string[]> {
  const hierarchies = await readdir('/sys/fs/cgroup').catch(() => [] as string[]);
  const found: string[] = [];
  for (const h of hierarchies) {
    const dir = join('/sys/fs/cgroup', h, 'agentfense', sandboxId);
    if (
      await stat(dir).then(
        () => true,
        () => false,
      )
    )
      found.push(dir);
  }
  return found;
}

async function leftovers(marker: string) {
  const list = await execa(process.execPath, [bin, 'sandbox', 'list', '--data', data, '--json']);
  const sleeping = await execa('pgrep', ['-f', `sleep ${marker}`], { reject: false });
  const run = await readdir(join(data, 'run')).catch(() => [] as string[]);
  return {
    sandboxes: JSON.parse(list.stdout) as unknown[],
    directories: await readdir(join(data, 'sandboxes')).catch(() => [] as string[]),
    mounts: (await listMounts()).filter((m) => m.mountpoint.startsWith(data)),
    processes: sleeping.stdout.trim(),
    // Per-process temporary /etc copies (the shared, host-keyed cache `etc-cache-…` is meant to stay).
    etcTemp: run.filter((n) => n.startsWith('bwrap-etc-') || n.startsWith('etc-build-')),
  };
}

const none = { sandboxes: [], directories: [], mounts: [], processes: '', etcTemp: [] };

describe('run and signals', () => {
  for (const [signal, status] of [
    ['SIGTERM', 143],
    ['SIGINT', 130],
    ['SIGHUP', 129],
  ] as const) {
    it(`${signal} stops the command, removes the sandbox and exits ${status}`, async () => {
      const marker = `301.${status}`;
      const { child } = await startSleeper(marker);
      child.kill(signal);
      const r = await child;
      expect(r.exitCode).toBe(status);
      expect(r.stderr).toContain(`${signal}: the command was stopped and the sandbox removed`);
      expect(await leftovers(marker)).toEqual(none);
    });
  }

  it('a run killed with SIGKILL has its command killed and its sandbox removed, with no other invocation', async () => {
    const marker = '302.9';
    const { child, sandboxId } = await startSleeper(marker);
    child.kill('SIGKILL');
    await child;
    // No other agentfense command runs here: the run's own watchdog (armed before the command started)
    // sees it die and reaps it — the command is killed even when bwrap's --die-with-parent does not
    // fire (nested user namespace), through the sandbox's cgroups, which are removed too; then the
    // record, the directory, the mounts and the linked codebase go.
    const deadline = Date.now() + 30_000;
    let processes: string;
    let state: { directories: string[]; mounts: unknown[]; cgroups: string[] } | undefined;
    for (;;) {
      processes = (await execa('pgrep', ['-f', `sleep ${marker}`], { reject: false })).stdout.trim();
      const reaping = await execa('pgrep', ['-f', `reaper.js --data ${data}`], { reject: false });
      state = {
        directories: await readdir(join(data, 'sandboxes')).catch(() => [] as string[]),
        mounts: (await listMounts()).filter((m) => m.mountpoint.startsWith(data)),
        cgroups: await cgroupsOf(sandboxId),
      };
      const clean =
        reaping.exitCode !== 0 &&
        processes === '' &&
        state.directories.length === 0 &&
        state.mounts.length === 0 &&
        state.cgroups.length === 0;
      if (clean || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const pid of processes.split('\n').filter((p) => p !== '')) {
      try {
        process.kill(Number(pid), 'SIGKILL'); // leave nothing behind for the next test
      } catch {
        // gone meanwhile
      }
    }
    expect({ processes, ...state }).toEqual({ processes: '', directories: [], mounts: [], cgroups: [] });
    // The reaper has exited: nothing is listed, and the run's linked codebase is gone too.
    expect(await leftovers(marker)).toEqual(none);
    const codebases = await execa(process.execPath, [bin, 'codebase', 'list', '--data', data, '--json']);
    expect(JSON.parse(codebases.stdout)).toEqual([]);
  });
});
