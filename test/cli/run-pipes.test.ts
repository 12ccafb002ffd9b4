// `agentfense run` writing into pipes, on both paths (in-process, and through the run helper): a slow
// reader still gets every byte (the executable's fast exit used to drop what the pipe had not taken yet),
// and a reader that goes away (`| head -c 4`) ends the writing quietly, without an EPIPE stack trace, and
// the status is still the command's. And --stdin's size limit (16 MiB) on both paths.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';
import { waitForReapers } from '../helpers/reapers.js';
import { startHelper, stopHelper } from '../helpers/run-helper.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const HANDED = 'handed to the run helper';

let scratch: string;
let repo: string;
let data: string;

const quote = (a: string): string => `'${a.replaceAll("'", `'\\''`)}'`;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-cli-pipes-'));
  repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  await execa('cp', ['-a', `${root}examples/demo-repo`, repo]);
});

afterAll(async () => {
  await stopHelper(data);
  expect(await waitForReapers(data)).toBe(true);
  const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

/** `bash -c '<agentfense run … -- sh -c script> 2>errFile | <reader>; echo $PIPESTATUS'`. */
async function piped(
  path: 'in-process' | 'helper',
  script: string,
  reader: string | ((errFile: string) => string),
) {
  const env =
    path === 'helper'
      ? { AGENTFENSE_RUN_HELPER: '1', AGENTFENSE_RUN_HELPER_IDLE: '60' }
      : { AGENTFENSE_RUN_HELPER: '0' };
  const errFile = join(scratch, `err-${Date.now()}`);
  const run = [process.execPath, bin, 'run', repo, '--data', data, '-v', '--', 'sh', '-c', script]
    .map(quote)
    .join(' ');
  const r = await execa(
    'bash',
    [
      '-c',
      `${run} 2>${quote(errFile)} | ${typeof reader === 'string' ? reader : reader(errFile)}; echo "status=\${PIPESTATUS[0]}"`,
    ],
    { env },
  );
  return { stdout: r.stdout, stderr: await readFile(errFile, 'utf8') };
}

for (const path of ['in-process', 'helper'] as const) {
  describe(`run into a pipe (${path})`, () => {
    beforeAll(async () => {
      if (path !== 'helper') return;
      await startHelper([bin, 'run', repo, '--data', data, '--', 'true'], data, {
        AGENTFENSE_RUN_HELPER: '1',
        AGENTFENSE_RUN_HELPER_IDLE: '60',
      });
    });

    it('a slow reader gets all 10 MB of the output', async () => {
      // The reader takes nothing until `run` has done everything but exit (its last -v step is on
      // stderr): the pipe then holds 64 KiB and the rest waits in `run`, which must not exit before.
      const r = await piped(
        path,
        'head -c 10000000 /dev/zero',
        // Through the helper stderr comes over the same connection as stdout, paused with it: the
        // reader just sleeps.
        path === 'helper'
          ? '(sleep 1; wc -c)'
          : (err) =>
              `(until grep -qs 'sandbox forgotten' ${quote(err)}; do sleep 0.1; done; sleep 0.5; wc -c)`,
      );
      expect(r.stdout.split('\n')).toEqual(['10000000', 'status=0']);
      if (path === 'helper') expect(r.stderr).toContain(HANDED);
      else expect(r.stderr).not.toContain(HANDED);
    });

    it('--stdin over 16 MiB is refused with an error naming it (status 2); nothing runs', async () => {
      const r = await execa(
        process.execPath,
        [bin, 'run', repo, '--data', data, '-v', '--stdin', '--', 'sh', '-c', 'wc -c; echo ran >&2'],
        {
          reject: false,
          input: Buffer.alloc(17 * 1024 * 1024, 97),
          env:
            path === 'helper'
              ? { AGENTFENSE_RUN_HELPER: '1', AGENTFENSE_RUN_HELPER_IDLE: '60' }
              : { AGENTFENSE_RUN_HELPER: '0' },
        },
      );
      expect(r.exitCode).toBe(2);
      expect(r.stderr).toContain('--stdin: standard input is over 16 MiB');
      expect(r.stderr).not.toContain('ran');
      expect(r.stdout).toBe('');
      // Just under the limit still works.
      const ok = await execa(
        process.execPath,
        [bin, 'run', repo, '--data', data, '--stdin', '--', 'wc', '-c'],
        {
          reject: false,
          input: Buffer.alloc(16 * 1024 * 1024, 97),
          env:
            path === 'helper'
              ? { AGENTFENSE_RUN_HELPER: '1', AGENTFENSE_RUN_HELPER_IDLE: '60' }
              : { AGENTFENSE_RUN_HELPER: '0' },
        },
      );
      expect([ok.exitCode, ok.stdout]).toEqual([0, String(16 * 1024 * 1024)]);
    });

    it('a reader that goes away (head) ends the output quietly; the status is the command’s', async () => {
      const r = await piped(path, 'yes | head -c 3000000; exit 5', 'head -c 4');
      expect(r.stdout.split('\n')).toEqual(['y', 'y', 'status=5']);
      expect(r.stderr).not.toMatch(/EPIPE|Error|at /);
    });
  });
}
