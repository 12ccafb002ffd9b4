// The `agentfense` executable runs the esbuild bundle of the CLI (packages/control/scripts/bundle-cli.js)
// after a build, and tsc's output when the bundle is older than a package's last `tsc -b` or the last
// install (it would run stale code). Which one ran shows in the watchdog every `run` arms: its argv names
// the reaper next to the code that armed it (dist/bundle/reaper.js or dist/cli/reaper.js).
import { mkdtemp, rm, stat, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitForReapers } from '../helpers/reapers.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const controlBuild = `${root}packages/control/dist/.tsbuildinfo`;
const bundle = `${root}packages/control/dist/bundle/cli.js`;
/** pnpm rewrites it when an install changes something. */
const modules = `${root}node_modules/.modules.yaml`;

let scratch: string;
let repo: string;
let data: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-cli-bundle-'));
  repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  await execa('cp', ['-a', `${root}examples/demo-repo`, repo]);
});

afterAll(async () => {
  expect(await waitForReapers(data)).toBe(true);
  await rm(scratch, { recursive: true, force: true });
});

/** Runs a command that lasts a moment and returns the reaper path its watchdog would start. */
async function reaperOfARun(): Promise<string> {
  const run = execa(
    process.execPath,
    [bin, 'run', repo, '--data', data, '--', 'sh', '-c', 'sleep 2; cat /workspace/README.md'],
    { reject: false },
  );
  let argv = '';
  for (let i = 0; i < 200 && argv === ''; i++) {
    const found = await execa('pgrep', ['-af', `reaper.js --data ${data}`], { reject: false });
    argv = found.stdout.split('\n').find((line) => line.includes('agentfense-watchdog')) ?? '';
    if (argv === '') await new Promise((r) => setTimeout(r, 50));
  }
  const result = await run;
  expect(result.exitCode).toBe(0);
  expect(result.stdout).toContain('demo');
  const reaper = argv.split(' ').find((word) => word.endsWith('/reaper.js'));
  if (reaper === undefined) throw new Error(`no watchdog seen for the run (pgrep: ${argv})`);
  return reaper;
}

describe('the agentfense executable', () => {
  it('runs the bundle after a build', async () => {
    expect(await reaperOfARun()).toBe(`${root}packages/control/dist/bundle/reaper.js`);
  });

  it.each([
    ['a package was rebuilt after the bundle (a bare tsc -b)', controlBuild],
    ['an install changed the dependencies after the bundle', modules],
  ])("runs tsc's output when %s", async (_, newer) => {
    const before = await stat(newer);
    const built = (await stat(bundle)).mtime;
    try {
      await utimes(newer, before.atime, new Date(built.getTime() + 60_000));
      expect(await reaperOfARun()).toBe(`${root}packages/control/dist/cli/reaper.js`);
    } finally {
      await utimes(newer, before.atime, before.mtime);
    }
  });
});
