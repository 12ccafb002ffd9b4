// `agentfense run` as a user runs it (the built bin, a real worker mount, real bwrap): the sandboxed
// command's output and status come through, --diff/--commit/--json/--timeout behave as documented, and
// nothing is left behind (no sandbox record without --keep, no mount).
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';
import { waitForReapers } from '../helpers/reapers.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;

let scratch: string;
let repo: string;
let data: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-cli-run-'));
  repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  await execa('cp', ['-a', `${root}examples/demo-repo`, repo]);
});

afterAll(async () => {
  // The last runs' sandboxes are removed in the background of their exit.
  expect(await waitForReapers(data)).toBe(true);
  const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

function agentfense(args: string[], options: { input?: string } = {}) {
  return execa(process.execPath, [bin, ...args], { reject: false, ...options });
}

/** `agentfense run <repo> --data <data> <flags> -- sh -c <script>`. */
function runSh(flags: string[], script: string, options: { input?: string } = {}) {
  return agentfense(['run', repo, '--data', data, ...flags, '--', 'sh', '-c', script], options);
}

describe('agentfense run', () => {
  it("passes the command's output and exit status through; secrets are invisible", async () => {
    const r = await runSh([], 'ls /workspace; cat /workspace/secrets/deploy.pem; exit 7');
    expect(r.exitCode).toBe(7);
    expect(r.stdout.split('\n')).toEqual(['README.md', 'config', 'docs', 'output', 'src']);
    expect(r.stderr).toContain('/workspace/secrets/deploy.pem: No such file or directory');
    const list = await agentfense(['sandbox', 'list', '--data', data, '--json']);
    expect(JSON.parse(list.stdout)).toEqual([]); // destroyed without --keep
  });

  it('--diff prints the change set; the directory is untouched without --commit', async () => {
    const r = await runSh(
      ['--diff'],
      'echo report > /workspace/output/report.txt; echo no >> /workspace/src/app.py',
    );
    expect(r.exitCode).not.toBe(0); // the denied append fails the shell line
    expect(r.stderr).toContain('Permission denied');
    expect(r.stderr).toContain('A /output/report.txt');
    expect(r.stdout).toContain('+++ b/output/report.txt');
    expect(r.stdout).toContain('+report');
    await expect(readFile(join(repo, 'output/report.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('--commit writes the changes into the directory, and reports a conflict with status 3', async () => {
    const ok = await runSh(['--commit'], 'echo v1 > /workspace/output/c.txt');
    expect(ok.exitCode).toBe(0);
    expect(await readFile(join(repo, 'output/c.txt'), 'utf8')).toBe('v1\n');

    // The sandbox rewrites c.txt; meanwhile the directory's copy changes behind its back.
    const sandboxRun = runSh(['--commit'], 'echo sandbox > /workspace/output/c.txt; echo written; sleep 3');
    // Output is streamed live: once the sandbox has written its copy, edit the directory's.
    await new Promise<void>((done) => {
      sandboxRun.stdout.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('written')) done();
      });
    });
    await writeFile(join(repo, 'output/c.txt'), 'host edit\n');
    const r = await sandboxRun;
    expect(r.exitCode).toBe(3);
    expect(r.stderr).toMatch(/conflict, not written: \/output\/c\.txt/);
    expect(await readFile(join(repo, 'output/c.txt'), 'utf8')).toBe('host edit\n');
  });

  it('--json prints one object with status, output and changes', async () => {
    const r = await runSh(
      ['--json', '--env', 'GREETING=hi', '--cwd', '/workspace/src'],
      'echo $GREETING; pwd; echo x > /workspace/output/j.txt',
    );
    expect(r.exitCode).toBe(0);
    const out = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(out).toMatchObject({
      exitCode: 0,
      timedOut: false,
      stdout: 'hi\n/workspace/src\n',
      stderr: '',
      sandboxId: null,
    });
    expect(out.changes).toEqual([
      { path: '/output/j.txt', kind: 'added', type: 'file', size: 2, mode: 0o644 },
    ]);
  });

  it('--stdin passes standard input to the command', async () => {
    const r = await agentfense(['run', repo, '--data', data, '--stdin', '--', 'wc', '-c'], {
      input: 'twelve bytes',
    });
    expect(r.exitCode).toBe(0);
    expect(r.stdout.trim()).toBe('12');
  });

  it('--timeout kills the command and exits 124', async () => {
    const started = Date.now();
    const r = await agentfense(['run', repo, '--data', data, '--timeout', '1', '--', 'sleep', '30']);
    expect(r.exitCode).toBe(124);
    expect(r.stderr).toContain('timed out after 1 s');
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it('--keep keeps a stopped sandbox whose audit trail and log can be read', async () => {
    const r = await agentfense([
      'run',
      repo,
      '--data',
      data,
      '--keep',
      '--json',
      '--',
      'cat',
      '/workspace/.env',
    ]);
    expect(r.exitCode).toBe(1);
    const { sandboxId } = JSON.parse(r.stdout) as { sandboxId: string };
    expect(sandboxId).toMatch(/^sb_/);
    const inspect = await agentfense(['sandbox', 'inspect', sandboxId, '--data', data, '--json']);
    expect(JSON.parse(inspect.stdout)).toMatchObject({ id: sandboxId, state: 'STOPPED' });
    const audit = await agentfense(['audit', sandboxId, '--data', data, '--json']);
    expect(JSON.parse(audit.stdout)).toContainEqual(
      expect.objectContaining({ op: 'lookup', path: '/.env', decision: 'deny', errno: 'ENOENT' }),
    );
    const logs = await agentfense(['logs', sandboxId, '--data', data]);
    expect(logs.stdout).toMatch(/INFO +mounted /);
    const destroyed = await agentfense(['sandbox', 'destroy', sandboxId, '--data', data]);
    expect(destroyed.exitCode).toBe(0);
    const gone = await agentfense(['sandbox', 'inspect', sandboxId, '--data', data]);
    expect(gone.exitCode).toBe(1);
    expect(gone.stderr).toContain(sandboxId);
  });

  it('passes no fd it inherited to the sandboxed command', async () => {
    // bash's `exec 200<file` opens fd 200 without close-on-exec and `exec node …` hands it to the CLI, as a
    // careless parent would; bwrap would pass it on to the command unless the CLI closes it first. (Node
    // itself marks low inherited fds close-on-exec, not high ones: fd 200.)
    const secret = join(scratch, 'host-secret.txt');
    await writeFile(secret, 'host only\n');
    const r = await execa(
      'bash',
      [
        '-c',
        'exec 200<"$1"; shift; exec "$@"',
        'bash',
        secret,
        process.execPath,
        bin,
        'run',
        repo,
        '--data',
        data,
        '--',
        'sh',
        '-c',
        'ls /proc/self/fd; cat /proc/self/fd/200',
      ],
      { reject: false },
    );
    expect(r.stdout.split('\n')).toEqual(['0', '1', '2', '3']); // 3: ls's own directory fd
    expect(r.stderr).toContain('/proc/self/fd/200: No such file or directory');
  });

  it('refuses bad input with status 2 and a message naming the problem', async () => {
    const badEnv = await agentfense(['run', repo, '--data', data, '--env', 'NOEQUALS', '--', 'true']);
    expect(badEnv.exitCode).toBe(2);
    expect(badEnv.stderr).toBe('agentfense: --env "NOEQUALS": expected KEY=VALUE');
    const badTimeout = await agentfense(['run', repo, '--data', data, '--timeout', 'soon', '--', 'true']);
    expect(badTimeout.exitCode).toBe(2);
    const badId = await agentfense(['audit', '../../etc', '--data', data]);
    expect(badId.exitCode).toBe(2);
  });
});
