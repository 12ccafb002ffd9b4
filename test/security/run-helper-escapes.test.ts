// Attack: through the one-shot CLI's run helper (packages/control/src/cli/run-helper/), the agent writes a
// file holding terminal control sequences and waits for the operator's `run --diff` to print it on a
// terminal (set the title, clear the screen, OSC 52 into the clipboard). Defence: the client tells the
// helper whether its stdout and stderr are terminals, and the helper's writers carry that as isTTY, so
// `run` escapes the diff's contents exactly as in-process (test/security/terminal-escapes.test.ts).
// Without it the helper's writers are never terminals and the raw ESC/BEL bytes reach the pty. The same
// holds for the command's own output (OSC 52 into the clipboard), escaped on a terminal but for colours.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';
import { waitForReapers } from '../helpers/reapers.js';
import { startHelper, stopHelper } from '../helpers/run-helper.js';
import { onTerminal } from '../helpers/terminal.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const ON = { AGENTFENSE_RUN_HELPER: '1', AGENTFENSE_RUN_HELPER_IDLE: '60' };
const ESC = '\u001b';
const BEL = '\u0007';
const EVIL_CONTENT = String.raw`line\033[2J\033]0;pwned\007\n`;

let scratch: string;
let repo: string;
let data: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-sec-helper-esc-'));
  repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  await execa('cp', ['-a', `${root}examples/demo-repo`, repo]);
  // The first run works in-process and leaves the helper.
  await startHelper([bin, 'run', repo, '--data', data, '--', 'true'], data, ON);
});

afterAll(async () => {
  await stopHelper(data);
  expect(await waitForReapers(data)).toBe(true);
  const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

/** `agentfense run REPO --data DATA -v --diff` of a command that writes the hostile file. */
const argv = (): string[] => [
  bin,
  'run',
  repo,
  '--data',
  data,
  '-v',
  '--diff',
  '--',
  'sh',
  '-c',
  `printf '${EVIL_CONTENT}' > /workspace/output/note.txt`,
];

describe('terminal safety of run --diff through the run helper', () => {
  it("on the client's terminal, a diff's contents are shown escaped, not obeyed", async () => {
    const r = await onTerminal([process.execPath, ...argv()], ON);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain('handed to the run helper');
    expect(r.stdout).toContain(String.raw`+line\x1b[2J\x1b]0;pwned\a`);
    expect(r.stdout).not.toContain(ESC);
    expect(r.stdout).not.toContain(BEL);
  });

  it('piped, the diff keeps the file’s exact bytes (as in-process)', async () => {
    const r = await execa(process.execPath, argv(), { reject: false, env: ON });
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toContain('handed to the run helper');
    expect(r.stdout).toContain(`+line${ESC}[2J${ESC}]0;pwned${BEL}`);
  });

  it("on the client's terminal, the command's own escape sequences are shown escaped; colours pass", async () => {
    const r = await onTerminal(
      [
        process.execPath,
        bin,
        'run',
        repo,
        '--data',
        data,
        '-v',
        '--',
        'printf',
        String.raw`\033]52;c;cm0gLXJmIH4=\007\033[31mred\033[0m\n`,
      ],
      ON,
    );
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain('handed to the run helper');
    expect(r.stdout).toContain(String.raw`\x1b]52;c;cm0gLXJmIH4=\a`);
    expect(r.stdout).toContain(`${ESC}[31mred${ESC}[0m`);
    expect(r.stdout).not.toContain(`${ESC}]`);
    expect(r.stdout).not.toContain(BEL);
  });
});
