// Issue 12 rows 12/13 (bwrap): `run` handled no signal, so SIGTERM/SIGINT/SIGHUP killed the CLI with its
// sandbox still there (the command running, a STOPPED or RUNNING record, a `bwrap-etc-…` temporary
// directory); a kill -9 of `run` left its sandbox forever. Now the signal stops the command, removes the
// sandbox and exits 128+N, and a killed run's sandbox is removed by the next invocation's recovery.
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
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
  // Wrapped: an execa child is a promise, which an async function would wait for.
  return { child };
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

  it('a run killed with SIGKILL leaves nothing once the next invocation has recovered', async () => {
    const marker = '302.9';
    const { child } = await startSleeper(marker);
    child.kill('SIGKILL');
    await child;
    // The next invocation (any command that opens the data directory) recovers the dead run's sandbox:
    // its record, directory and mounts are gone. Its processes are not checked here: with the sandbox
    // user's nested user namespace, bwrap's --die-with-parent does not always fire, and the orphaned
    // command is not always in the sandbox's cgroups for recovery to find (a known gap, docs/security.md
    // "What is left"); SIGTERM/SIGINT/SIGHUP above do check that nothing keeps running.
    const left = await leftovers(marker);
    expect({ ...left, processes: '' }).toEqual(none);
    for (const pid of left.processes.split('\n').filter((p) => p !== '')) {
      try {
        process.kill(Number(pid), 'SIGKILL'); // leave nothing behind for the next test
      } catch {
        // gone meanwhile
      }
    }
  });
});
