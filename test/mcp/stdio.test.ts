// `agentfense mcp <dir>` as an MCP client uses it: the SDK's own client over stdio against the built bin
// on a temp copy of examples/demo-repo (real worker mount, real bwrap). The demo's story (hidden secrets,
// refused write, allowed write, diff), bad input that must leave the sandbox usable, the persistent shell,
// commit with conflicts, and nothing left behind after stdin closes, SIGTERM or SIGINT.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  call,
  errorCode,
  mountsOf,
  processesOf,
  root,
  sandboxDirs,
  startStdio,
  waitGone,
} from '../helpers/mcp.js';
import type { StdioServer } from '../helpers/mcp.js';

let scratch: string;
let repo: string;
let data: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-mcp-stdio-'));
  repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  await execa('cp', ['-a', `${root}examples/demo-repo`, repo]);
});

afterAll(async () => {
  const left = await mountsOf(scratch);
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

/** The sandbox id the server announced on stderr. */
function sandboxIdOf(server: StdioServer): string {
  const match = /sandbox (sb_[0-9a-f-]+)/.exec(server.stderr());
  if (match?.[1] === undefined) throw new Error(`no sandbox id in: ${server.stderr()}`);
  return match[1];
}

/** Checks that neither a mount, a process nor data of the sandbox is left. */
async function expectNothingLeft(sandboxId: string): Promise<void> {
  expect(await mountsOf(sandboxId)).toEqual([]);
  expect(await mountsOf(data)).toEqual([]);
  expect(await processesOf(sandboxId)).toEqual([]);
  expect(await sandboxDirs(data)).toEqual([]);
  const list = await execa(process.execPath, [
    `${root}packages/control/bin/agentfense.js`,
    'sandbox',
    'list',
    '--data',
    data,
    '--json',
  ]);
  expect(JSON.parse(list.stdout)).toEqual([]);
}

describe('agentfense mcp over stdio (demo-repo, agent-safe)', () => {
  let server: StdioServer;
  let sandboxId: string;

  beforeAll(async () => {
    server = await startStdio(repo, data);
    sandboxId = sandboxIdOf(server);
  });

  afterAll(async () => {
    await server.client.close();
    await waitGone(server.pid);
    await expectNothingLeft(sandboxId);
  });

  it('lists the tools with schemas and descriptions; commit and discard are absent without --allow-commit', async () => {
    const { tools } = await server.client.listTools();
    expect(tools.map((t) => t.name)).toEqual([
      'run',
      'shell',
      'read_file',
      'write_file',
      'list_files',
      'explain',
      'changes',
      'checkpoint',
      'checkpoints',
      'rollback',
    ]);
    for (const tool of tools) {
      expect(tool.description?.length).toBeGreaterThan(50);
      expect(tool.inputSchema.type).toBe('object');
    }
    const run = tools.find((t) => t.name === 'run');
    expect(run?.inputSchema.required).toEqual(['command']);
    const commit = await call(server.client, 'commit');
    expect(errorCode(commit)).toBe('AF_NOT_FOUND');
    expect(commit.text).toContain('--allow-commit');
  });

  it('1. hidden secrets: not listed, "not found" when named, absent for commands', async () => {
    const list = await call(server.client, 'list_files');
    expect(list.isError).toBeFalsy();
    const names = (list.data.entries as { path: string }[]).map((e) => e.path);
    expect(names).toEqual(['README.md', 'config', 'docs', 'output', 'src']);
    for (const path of ['.env', 'secrets/deploy.pem', '/workspace/secrets/deploy.pem']) {
      const read = await call(server.client, 'read_file', { path });
      expect(errorCode(read)).toBe('AF_NOT_FOUND');
      expect(read.text).toContain('not found');
    }
    expect(errorCode(await call(server.client, 'list_files', { path: 'secrets' }))).toBe('AF_NOT_FOUND');
    const run = await call(server.client, 'run', { command: 'cat /workspace/.env; ls -a /workspace' });
    expect(run.isError).toBeFalsy();
    expect(run.data.exit_code).toBe(0);
    expect(run.data.stderr).toContain('.env: No such file or directory');
    expect(run.data.stdout).not.toContain('.env');
    expect(run.data.stdout).not.toContain('secrets');
    const explain = await call(server.client, 'explain', { paths: ['.env', 'src/app.py', 'output/r.txt'] });
    const results = explain.data.results as { path: string; permission: string }[];
    expect(results.map((r) => [r.path, r.permission])).toEqual([
      ['/workspace/.env', 'none'],
      ['/workspace/src/app.py', 'read'],
      ['/workspace/output/r.txt', 'write'],
    ]);
  });

  it('2. a refused write: an error naming the rules, for the tool and for a command', async () => {
    const before = await readFile(join(repo, 'src/app.py'), 'utf8');
    const write = await call(server.client, 'write_file', { path: 'src/app.py', content: 'pwned\n' });
    expect(errorCode(write)).toBe('AF_PERMISSION_DENIED');
    expect(write.text).toContain('explain');
    const run = await call(server.client, 'run', { command: "echo 'print(1)' >> src/app.py" });
    expect(run.data.exit_code).not.toBe(0);
    expect(run.data.stderr).toContain('Permission denied');
    const read = await call(server.client, 'read_file', { path: 'src/app.py' });
    expect(read.text).toBe(before);
  });

  it('3. an allowed write and 4. its diff, as a tool and as a resource; the directory is untouched', async () => {
    const write = await call(server.client, 'write_file', {
      path: 'output/report.txt',
      content: 'report: all good\n',
    });
    expect(write.isError).toBeFalsy();
    const nested = await call(server.client, 'write_file', { path: 'output/a/b/notes.md', content: 'x\n' });
    expect(nested.isError).toBeFalsy();
    const read = await call(server.client, 'read_file', { path: '/workspace/output/report.txt' });
    expect(read.text).toBe('report: all good\n');
    const changes = await call(server.client, 'changes');
    expect(changes.text).toContain('A /output/report.txt');
    expect(changes.text).toContain('+++ b/output/report.txt');
    expect(changes.text).toContain('+report: all good');
    const { resources } = await server.client.listResources();
    expect(resources.map((r) => r.uri)).toEqual(['agentfense://sandbox/changes']);
    const resource = await server.client.readResource({ uri: 'agentfense://sandbox/changes' });
    const first = resource.contents[0] as { text: string };
    expect(first.text).toContain('+report: all good');
    await expect(readFile(join(repo, 'output/report.txt'))).rejects.toThrow(/ENOENT/);
  });

  it('bad input gets a tool error and leaves the sandbox usable', async () => {
    const usable = async (): Promise<void> => {
      const r = await call(server.client, 'run', { command: 'echo still-here' });
      expect(r.data.stdout).toBe('still-here\n');
    };
    const unknown = await call(server.client, 'no_such_tool', { x: 1 });
    expect(errorCode(unknown)).toBe('AF_NOT_FOUND');
    expect(unknown.text).toContain('the tools are: run, shell');
    await usable();

    const missing = await call(server.client, 'run', {});
    expect(errorCode(missing)).toBe('AF_INVALID_ARGUMENT');
    expect(missing.text).toContain('missing required argument "command"');
    const typo = await call(server.client, 'read_file', { file: 'README.md' });
    expect(errorCode(typo)).toBe('AF_INVALID_ARGUMENT');
    const wrongType = await call(server.client, 'run', { command: 'true', timeout_seconds: 'soon' });
    expect(errorCode(wrongType)).toBe('AF_INVALID_ARGUMENT');
    expect(wrongType.text).toContain('timeout_seconds');
    await usable();

    for (const path of [
      '../../etc/passwd',
      '/etc/passwd',
      'src/../../etc/shadow',
      '/workspace/../etc/passwd',
    ]) {
      const escape = await call(server.client, 'read_file', { path });
      expect(errorCode(escape), path).toBe('AF_INVALID_ARGUMENT');
      expect(escape.text).toContain('relative to the codebase root');
    }
    expect(errorCode(await call(server.client, 'write_file', { path: '../x', content: 'x' }))).toBe(
      'AF_INVALID_ARGUMENT',
    );
    expect(errorCode(await call(server.client, 'list_files', { path: '..' }))).toBe('AF_INVALID_ARGUMENT');
    await usable();

    const endless = await call(server.client, 'run', {
      command: 'echo started; sleep 1000',
      timeout_seconds: 1,
    });
    expect(errorCode(endless)).toBe('AF_TIMEOUT');
    expect(endless.data.timed_out).toBe(true);
    expect(endless.data.stdout).toBe('started\n');
    expect(endless.text).toContain('timeout_seconds');
    const endlessShell = await call(server.client, 'shell', { command: 'sleep 1000', timeout_seconds: 1 });
    expect(errorCode(endlessShell)).toBe('AF_TIMEOUT');
    expect((await call(server.client, 'shell', { command: 'echo shell-ok' })).data.stdout).toBe('shell-ok\n');
    await usable();
  });

  it('shell: cd and export persist; reset starts a fresh shell', async () => {
    await call(server.client, 'shell', { command: 'cd src && export GREETING=hello' });
    const again = await call(server.client, 'shell', { command: 'pwd; echo "$GREETING"' });
    expect(again.data.stdout).toBe('/workspace/src\nhello\n');
    const fresh = await call(server.client, 'shell', { reset: true, command: 'pwd; echo "[$GREETING]"' });
    expect(fresh.data.stdout).toBe('/workspace\n[]\n');
    const exited = await call(server.client, 'shell', { command: 'exit 3' });
    expect(exited.data.shell_closed).toBe(true);
    expect((await call(server.client, 'shell', { command: 'echo back' })).data.stdout).toBe('back\n');
  });

  it('run: cwd and env apply; long output is cut with a visible note', async () => {
    const r = await call(server.client, 'run', {
      command: 'pwd; echo "$MODE"',
      cwd: 'src',
      env: { MODE: 'ci' },
    });
    expect(r.data.stdout).toBe('/workspace/src\nci\n');
    const long = await call(server.client, 'run', { command: 'head -c 300000 /dev/zero | tr "\\0" a' });
    expect(long.data.truncated).toBe(true);
    expect(long.text).toMatch(/\[\.\.\. \d+ characters truncated by agentfense/);
    expect(long.text.length).toBeLessThan(40_000);
  });

  it('checkpoints before a risky step and rolls back after it', async () => {
    const none = await call(server.client, 'rollback');
    expect(errorCode(none)).toBe('AF_WRONG_STATE');
    await call(server.client, 'write_file', { path: 'output/plan.txt', content: 'good\n' });
    const taken = await call(server.client, 'checkpoint', { name: 'before refactor' });
    expect(taken.isError).toBeFalsy();
    await call(server.client, 'run', {
      command: 'echo broken > /workspace/output/plan.txt; touch /workspace/output/junk',
    });
    const listed = await call(server.client, 'checkpoints');
    expect(listed.text).toContain('before refactor');
    const back = await call(server.client, 'rollback');
    expect(back.isError).toBeFalsy();
    expect(back.data.restored).toBe(taken.data.id);
    const after = await call(server.client, 'run', {
      command: 'cat /workspace/output/plan.txt; ls /workspace/output/junk 2>&1 || true',
    });
    expect(after.data.stdout).toMatch(/^good\n.*No such file/);
  });
});

describe('agentfense mcp --allow-commit', () => {
  it('commits allowed changes, reports conflicts as an error, discards; nothing left after SIGTERM', async () => {
    const server = await startStdio(repo, data, ['--allow-commit']);
    const sandboxId = sandboxIdOf(server);
    try {
      const names = (await server.client.listTools()).tools.map((t) => t.name);
      expect(names).toContain('commit');
      expect(names).toContain('discard');
      await call(server.client, 'write_file', { path: 'output/done.txt', content: 'done\n' });
      const ok = await call(server.client, 'commit');
      expect(ok.isError).toBeFalsy();
      expect(ok.data.applied).toEqual(['/output/done.txt']);
      expect(await readFile(join(repo, 'output/done.txt'), 'utf8')).toBe('done\n');

      // The same file changed on both sides: reported, not written.
      await call(server.client, 'write_file', { path: 'output/done.txt', content: 'sandbox\n' });
      await writeFile(join(repo, 'output/done.txt'), 'host\n');
      const conflict = await call(server.client, 'commit');
      expect(errorCode(conflict)).toBe('AF_CONFLICT');
      expect(conflict.text).toContain('/output/done.txt');
      expect(await readFile(join(repo, 'output/done.txt'), 'utf8')).toBe('host\n');

      const discard = await call(server.client, 'discard');
      expect(discard.isError).toBeFalsy();
      expect((await call(server.client, 'changes')).text).toContain('no changes');
    } finally {
      process.kill(server.pid, 'SIGTERM');
      await waitGone(server.pid);
      await server.client.close();
      await rm(join(repo, 'output/done.txt'), { force: true });
    }
    expect(server.stderr()).toContain('MCP server stopped (SIGTERM)');
    await expectNothingLeft(sandboxId);
  });
});

describe('agentfense mcp lifecycle', () => {
  it('SIGINT stops it and cleans up', async () => {
    const server = await startStdio(repo, data);
    const sandboxId = sandboxIdOf(server);
    expect((await call(server.client, 'run', { command: 'echo hi' })).data.stdout).toBe('hi\n');
    expect(await mountsOf(sandboxId)).not.toEqual([]);
    process.kill(server.pid, 'SIGINT');
    await waitGone(server.pid);
    await server.client.close();
    expect(server.stderr()).toContain('MCP server stopped (SIGINT)');
    await expectNothingLeft(sandboxId);
  });

  it('--keep keeps the stopped sandbox with its changes and names it', async () => {
    const server = await startStdio(repo, data, ['--keep']);
    const sandboxId = sandboxIdOf(server);
    await call(server.client, 'write_file', { path: 'output/kept.txt', content: 'kept\n' });
    await server.client.close();
    await waitGone(server.pid);
    expect(server.stderr()).toContain(`kept sandbox ${sandboxId}`);
    expect(await mountsOf(sandboxId)).toEqual([]);
    const cli = (args: string[]) =>
      execa(process.execPath, [`${root}packages/control/bin/agentfense.js`, ...args]);
    const info = JSON.parse(
      (await cli(['sandbox', 'inspect', sandboxId, '--data', data, '--json'])).stdout,
    ) as {
      state: string;
    };
    expect(info.state).toBe('STOPPED');
    await cli(['sandbox', 'destroy', sandboxId, '--data', data]);
    await expectNothingLeft(sandboxId);
  });

  it('refuses a directory that does not exist, with status 2 and nothing started', async () => {
    const r = await execa(
      process.execPath,
      [`${root}packages/control/bin/agentfense.js`, 'mcp', join(scratch, 'nope'), '--data', data],
      {
        reject: false,
        input: '',
      },
    );
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('is not a directory');
    expect(r.stdout).toBe('');
  });
});
