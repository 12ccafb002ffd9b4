// Attack: the agent names files (and makes the worker log and audit paths) with terminal control
// sequences and newlines, hoping the operator's terminal obeys them when `run --diff`, `audit`, `logs` or
// `explain` prints them — clearing the screen, setting the title, or forging a line such as
// "committed 0 change(s)". Defence: every path the CLI prints is quoted git-style when it holds control
// characters (protocol's quotePath), log lines are escaped, and a diff's contents are escaped when
// stdout is a terminal. Without the defence the raw ESC/BEL/newline bytes below reach stdout/stderr.
// The command's own output too: on a terminal `run` and `shell` pass text and colours (SGR) but show
// OSC (title, clipboard), DCS and cursor/screen sequences escaped, unless --raw-output; a pipe gets the
// bytes as they are.
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { useCliScratch } from '../helpers/cli-scratch.js';
import { onTerminal } from '../helpers/terminal.js';
import { shellOnTerminal } from '../helpers/terminal-shell.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const ESC = '\u001b';
const BEL = '\u0007';

const dirs = useCliScratch('af-sec-term-');

function agentfense(args: string[]) {
  return execa(process.execPath, [bin, ...args], { reject: false });
}

// printf-style escapes, expanded by the sandbox's shell: a newline, a clear-screen CSI, a title OSC.
const EVIL_NAME = String.raw`evil\n\033[2J\033]0;pwned\007`;
const EVIL_CONTENT = String.raw`line\033[2J\033]0;pwned\007\n`;

describe('terminal safety of what the CLI prints', () => {
  it('run --diff quotes hostile file names in the change list and the diff headers', async () => {
    const r = await agentfense([
      'run',
      dirs.repo,
      '--data',
      dirs.data,
      '--diff',
      '--',
      'sh',
      '-c',
      `printf '${EVIL_CONTENT}' > "/workspace/output/$(printf '${EVIL_NAME}')"`,
    ]);
    expect(r.exitCode).toBe(0);
    // The change list (stderr) shows the name escaped and quoted on one line.
    expect(r.stderr).toContain(String.raw`A "/output/evil\n\x1b[2J\x1b]0;pwned\a"`);
    expect(r.stderr).not.toContain(ESC);
    expect(r.stderr).not.toContain(BEL);
    // Diff headers are quoted as git quotes them; piped output keeps the file's exact contents.
    expect(r.stdout).toContain(String.raw`+++ "b/output/evil\n\x1b[2J\x1b]0;pwned\a"`);
    expect(r.stdout.split('\n').filter((l) => l.startsWith('+++'))).toHaveLength(1);
    expect(r.stdout).toContain(`+line${ESC}[2J${ESC}]0;pwned${BEL}`);
  });

  it("on a terminal, a diff's contents are shown escaped, not obeyed", async () => {
    const r = await onTerminal([
      process.execPath,
      bin,
      'run',
      dirs.repo,
      '--data',
      dirs.data,
      '--diff',
      '--',
      'sh',
      '-c',
      `printf '${EVIL_CONTENT}' > /workspace/output/note.txt`,
    ]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain(String.raw`+line\x1b[2J\x1b]0;pwned\a`);
    expect(r.stdout).not.toContain(ESC);
    expect(r.stdout).not.toContain(BEL);
  });

  it('audit and explain quote hostile paths', async () => {
    // A hidden name (.env* is hidden by agent-safe) looked up with control characters in it: a denial
    // the worker audits with the agent's chosen path.
    const run = await agentfense([
      'run',
      dirs.repo,
      '--data',
      dirs.data,
      '--keep',
      '--json',
      '--',
      'sh',
      '-c',
      `cat "/workspace/.env$(printf '\\033]0;pwned\\007')" 2>/dev/null; true`,
    ]);
    expect(run.exitCode).toBe(0);
    const id = (JSON.parse(run.stdout) as { sandboxId: string }).sandboxId;
    try {
      const audit = await agentfense(['audit', id, '--data', dirs.data, '--denied']);
      expect(audit.exitCode).toBe(0);
      expect(audit.stdout).toContain(String.raw`"/.env\x1b]0;pwned\a"`);
      expect(audit.stdout).not.toContain(ESC);
      expect(audit.stdout).not.toContain(BEL);
      const json = await agentfense(['audit', id, '--data', dirs.data, '--denied', '--json']);
      expect(json.stdout).not.toContain(ESC);
      expect(JSON.parse(json.stdout)).toEqual(
        expect.arrayContaining([expect.objectContaining({ path: `/.env${ESC}]0;pwned${BEL}` })]),
      );
    } finally {
      await agentfense(['sandbox', 'destroy', id, '--data', dirs.data]);
    }

    const explain = await agentfense(['explain', `/src/a\nrule #0 glob ** -> write`]);
    expect(explain.exitCode).toBe(0);
    expect(explain.stdout.trim().split('\n')).toHaveLength(1);
    expect(explain.stdout).toContain(String.raw`"/src/a\nrule #0 glob ** -> write"`);
  });

  // What the command prints: a clipboard write (OSC 52), a title (OSC 0), a DCS, a screen clear and a
  // cursor move, around a coloured word.
  const HOSTILE_OUTPUT = String.raw`\033]52;c;cm0gLXJmIH4=\007\033]0;pwned\007\033Pq#0\033\\\033[2J\033[H\033[31mred\033[0m\n`;

  it("on a terminal, run shows the command's escape sequences escaped and passes its colours", async () => {
    const argv = [process.execPath, bin, 'run', dirs.repo, '--data', dirs.data];
    const r = await onTerminal([...argv, '--', 'printf', HOSTILE_OUTPUT]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain(String.raw`\x1b]52;c;cm0gLXJmIH4=\a\x1b]0;pwned\a\x1bPq#0\x1b\\x1b[2J\x1b[H`);
    expect(r.stdout).toContain(`${ESC}[31mred${ESC}[0m`);
    expect(r.stdout).not.toContain(`${ESC}]`);
    expect(r.stdout).not.toContain(`${ESC}P`);
    expect(r.stdout).not.toContain(`${ESC}[2J`);
    expect(r.stdout).not.toContain(BEL);
    // Asked for: the bytes as they are.
    const raw = await onTerminal([...argv, '--raw-output', '--', 'printf', HOSTILE_OUTPUT]);
    expect(raw.stdout).toContain(`${ESC}]52;c;cm0gLXJmIH4=${BEL}${ESC}]0;pwned${BEL}`);
    // A pipe is not a terminal: exact bytes.
    const piped = await agentfense(['run', dirs.repo, '--data', dirs.data, '--', 'printf', HOSTILE_OUTPUT]);
    expect(piped.stdout).toBe(
      `${ESC}]52;c;cm0gLXJmIH4=${BEL}${ESC}]0;pwned${BEL}${ESC}Pq#0${ESC}\\${ESC}[2J${ESC}[H${ESC}[31mred${ESC}[0m`,
    );
  });

  it("on a terminal, shell shows the commands' escape sequences escaped", async () => {
    const r = await shellOnTerminal(
      [process.execPath, bin, 'shell', dirs.repo, '--data', dirs.data],
      [`printf '${HOSTILE_OUTPUT}'`, 'exit'],
    );
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain(String.raw`\x1b]52;c;cm0gLXJmIH4=\a\x1b]0;pwned\a`);
    expect(r.stdout).toContain(`${ESC}[31mred${ESC}[0m`);
    expect(r.stdout).not.toContain(`${ESC}]`);
    expect(r.stdout).not.toContain(BEL);
  });
});
