// `agentfense run` through the data directory's run helper (packages/control/src/cli/run-helper/): the
// first run of a data directory works in-process and leaves a helper; later runs hand their command line
// to it. What a user checks on that path: output and status come through as in-process, signals and a
// killed client stop the command and remove the sandbox, concurrent runs, a run next to `serve`, and the
// helper's own exits (idle, data directory removed, SIGTERM) leave no process, mount or socket behind.
// The system tests switch the helper off by default (vitest.config.ts); these switch it on.
import { mkdir, mkdtemp, readFile, readdir, readlink, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import type { ResultPromise } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';
import { waitForReapers } from '../helpers/reapers.js';
import { helperPids, stopHelper, until } from '../helpers/run-helper.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
/**
 * The helper on, spare sandboxes as users get them (on by default). A short idle time: a helper whose
 * file failed before its afterAll stopped it is gone soon after.
 */
const ON_DEFAULT = { AGENTFENSE_RUN_HELPER: '1', AGENTFENSE_RUN_HELPER_IDLE: '30' };
/**
 * The helper without spare sandboxes: each run creates and starts its own, so these tests check that path
 * (and that nothing is left right after a run). The spares have their own describe below.
 */
const ON = { ...ON_DEFAULT, AGENTFENSE_RUN_HELPER_SPARE: '0' };

let scratch: string;
let repo: string;
let data: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-cli-helper-'));
  repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  await execa('cp', ['-a', `${root}examples/demo-repo`, repo]);
});

afterAll(async () => {
  for (const dir of await readdir(scratch)) await stopHelper(join(scratch, dir));
  expect(await waitForReapers(data)).toBe(true);
  const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    () => false,
  );

interface AgentfenseOptions {
  env?: Record<string, string>;
  input?: string;
  /** The environment under `env` (ON unless given). */
  base?: Record<string, string>;
}

function agentfense(args: string[], options: AgentfenseOptions = {}) {
  const { base = ON, env, ...rest } = options;
  return execa(process.execPath, [bin, ...args], { reject: false, ...rest, env: { ...base, ...env } });
}

/** `run <repo> --data <dataDir> -v <flags> -- sh -c <script>`. */
function runSh(
  flags: string[],
  script: string,
  options: AgentfenseOptions & { dataDir?: string; repoDir?: string } = {},
) {
  const { dataDir = data, repoDir = repo, ...rest } = options;
  return agentfense(['run', repoDir, '--data', dataDir, '-v', ...flags, '--', 'sh', '-c', script], rest);
}

const HANDED = 'handed to the run helper';

/** The first run of `dataDir`: in-process, and it leaves a helper listening. */
async function firstRun(
  dataDir: string,
  env: Record<string, string> = {},
  more: { base?: Record<string, string>; repoDir?: string; flags?: string[] } = {},
): Promise<void> {
  const r = await runSh(more.flags ?? [], 'true', { dataDir, env, ...more });
  expect(r.exitCode).toBe(0);
  expect(r.stderr).toContain('data directory open');
  expect(r.stderr).not.toContain(HANDED);
  await until('the helper socket', () => exists(join(dataDir, 'run-helper.sock')));
}

interface Listed {
  id: string;
  state: string;
  labels: Record<string, string>;
}

async function sandboxList(dataDir = data, flags: string[] = []): Promise<Listed[]> {
  const list = await agentfense(['sandbox', 'list', '--data', dataDir, '--json', ...flags]);
  return JSON.parse(list.stdout) as Listed[];
}

/** The idle spare sandboxes of `dataDir`: listed only when asked for by their reserved label. */
function spareList(dataDir: string): Promise<Listed[]> {
  return sandboxList(dataDir, ['--label', 'agentfense.spare=true']);
}

/** Starts `run -v -- sleep <marker>` and resolves once the command runs in the sandbox. */
async function startSleeper(marker: string): Promise<{ child: ResultPromise<{ reject: false }> }> {
  const child = execa(process.execPath, [bin, 'run', repo, '--data', data, '-v', '--', 'sleep', marker], {
    reject: false,
    env: ON,
  });
  let seen = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      if (seen.includes('started (worker mounted')) resolve();
    });
    void child.then(() => reject(new Error(`run ended early: ${seen}`)));
  });
  expect(seen).toContain(HANDED);
  await until('the sleeper', async () => (await sleeping(marker)) === true);
  // Wrapped: an execa child is a promise, which an async function would wait for.
  return { child };
}

async function sleeping(marker: string): Promise<boolean> {
  return (await execa('pgrep', ['-f', `sleep ${marker}`], { reject: false })).exitCode === 0;
}

/** Sandbox directories and mounts left under `dataDir` (the helper removes them after answering). */
async function nothingLeft(dataDir = data): Promise<boolean> {
  const dirs = await readdir(join(dataDir, 'sandboxes')).catch(() => [] as string[]);
  const mounts = (await listMounts()).filter((m) => m.mountpoint.startsWith(dataDir));
  return dirs.length === 0 && mounts.length === 0;
}

describe('agentfense run through the run helper', () => {
  beforeAll(async () => {
    await firstRun(data);
  });

  it("passes the command's output and status through; secrets invisible; nothing listed or left", async () => {
    const r = await runSh([], 'ls /workspace; cat /workspace/secrets/deploy.pem; echo to-err >&2; exit 7');
    expect(r.stderr).toContain(HANDED);
    expect(r.exitCode).toBe(7);
    expect(r.stdout.split('\n')).toEqual(['README.md', 'config', 'docs', 'output', 'src']);
    expect(r.stderr).toContain('/workspace/secrets/deploy.pem: No such file or directory');
    expect(r.stderr).toContain('to-err');
    expect(await sandboxList()).toEqual([]); // gone when run returns, as in-process
    await until('the retired sandbox to be removed', () => nothingLeft());
  });

  it('--stdin, --diff, --commit, relative DIR and --rules, --json', async () => {
    await writeFile(join(scratch, 'rules.json'), JSON.stringify([{ pattern: '**', permission: 'write' }]));
    // cwd: the client's, not the helper's: a relative DIR and --rules file resolve against it.
    const relative = await execa(
      process.execPath,
      [
        bin,
        'run',
        'repo',
        '--data',
        data,
        '-v',
        '--rules',
        'rules.json',
        '--stdin',
        '--diff',
        '--',
        'sh',
        '-c',
        'cat > /workspace/src/new.txt',
      ],
      { reject: false, cwd: scratch, input: 'from stdin\n', env: ON },
    );
    expect(relative.stderr).toContain(HANDED);
    expect(relative.exitCode).toBe(0);
    expect(relative.stderr).toContain('A /src/new.txt');
    expect(relative.stdout).toContain('+from stdin');
    const committed = await runSh(['--commit'], 'echo done > /workspace/output/c.txt');
    expect(committed.exitCode).toBe(0);
    expect(committed.stderr).toContain(`committed 1 change(s) to ${repo}`);
    expect(await readFile(join(repo, 'output/c.txt'), 'utf8')).toBe('done\n');
    const json = await agentfense([
      'run',
      repo,
      '--data',
      data,
      '--json',
      '--',
      'sh',
      '-c',
      'echo hi; exit 4',
    ]);
    expect(json.exitCode).toBe(4);
    expect(JSON.parse(json.stdout)).toMatchObject({ exitCode: 4, stdout: 'hi\n', sandboxId: null });
  });

  it('a --json object over 8 MiB comes through whole (sent in frames the client accepts)', async () => {
    const r = await runSh(['--json'], 'head -c 9000000 /dev/zero | tr "\\0" a');
    expect(r.stderr).toContain(HANDED);
    expect(r.exitCode).toBe(0);
    const result = JSON.parse(r.stdout) as { exitCode: number; stdout: string };
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toHaveLength(9_000_000);
  });

  it('--diff --commit with a diff over 8 MiB prints the whole diff and the commit report', async () => {
    const big = join(scratch, 'big');
    await mkdir(big);
    const r = await agentfense(
      [
        'run',
        big,
        '--data',
        data,
        '-v',
        '--preset',
        'full-access',
        '--diff',
        '--commit',
        '--',
        'sh',
        '-c',
      ].concat('for i in $(seq 12); do yes aaaaaaaaaaaaaaa | head -c 800000 > /workspace/big$i.txt; done'),
    );
    expect(r.stderr).toContain(HANDED);
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toContain(`committed 12 change(s) to ${big}`);
    expect(r.stdout.split('\n').filter((l) => l.startsWith('+++ b/big'))).toHaveLength(12);
    expect(r.stdout.length).toBeGreaterThan(9_600_000);
    expect((await readdir(big)).length).toBe(12);
  });

  it('bad input is refused as in-process (status 2), --timeout is 124', async () => {
    const bad = await runSh(['--pids', 'lots'], 'true');
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain('--pids must be a positive whole number');
    const slow = await runSh(['--timeout', '0.5'], 'sleep 30');
    expect(slow.stderr).toContain(HANDED);
    expect(slow.exitCode).toBe(124);
    expect(slow.stderr).toContain('timed out after 0.5 s');
  });

  it('two runs at once each get their own sandbox, output and status', async () => {
    const [a, b] = await Promise.all([
      runSh([], 'echo first > /workspace/output/x; sleep 1; cat /workspace/output/x; exit 1'),
      runSh([], 'echo second > /workspace/output/x; sleep 1; cat /workspace/output/x; exit 2'),
    ]);
    expect([a.exitCode, a.stdout, b.exitCode, b.stdout]).toEqual([1, 'first', 2, 'second']);
    expect(a.stderr).toContain(HANDED);
    expect(b.stderr).toContain(HANDED);
  });

  for (const [signal, status] of [
    ['SIGTERM', 143],
    ['SIGINT', 130],
    ['SIGHUP', 129],
  ] as const) {
    it(`${signal} to the client stops the command and removes the sandbox (status ${status})`, async () => {
      const marker = `${4000 + status}.${Date.now() % 1000}`;
      const { child } = await startSleeper(marker);
      child.kill(signal);
      const r = await child;
      expect(r.exitCode).toBe(status);
      expect(r.stderr).toContain(`${signal}: the command was stopped and the sandbox removed`);
      expect(await sleeping(marker)).toBe(false);
      expect(await sandboxList()).toEqual([]);
      await until('the sandbox to be removed', () => nothingLeft());
    });
  }

  it('a SIGKILLed client: the helper stops its command and removes its sandbox', async () => {
    const marker = `4999.${Date.now() % 1000}`;
    const { child } = await startSleeper(marker);
    child.kill('SIGKILL');
    await child;
    await until('the command to be stopped', async () => !(await sleeping(marker)));
    await until(
      'the sandbox to be removed',
      async () => (await sandboxList()).length === 0 && (await nothingLeft()),
    );
  });

  it('a run while `agentfense serve` has the same data directory open', async () => {
    const server = execa(
      process.execPath,
      [bin, 'serve', '--listen', '127.0.0.1:0', '--grpc-listen', '', '--data', data],
      {
        reject: false,
        env: ON,
      },
    );
    try {
      await new Promise<void>((resolve, reject) => {
        let seen = '';
        server.stderr.on('data', (chunk: Buffer) => {
          seen += chunk.toString();
          if (/serving http:\/\//.test(seen)) resolve();
        });
        void server.then(() => reject(new Error(`serve exited: ${seen}`)));
      });
      const r = await runSh([], 'cat /workspace/README.md | head -1');
      expect(r.stderr).toContain(HANDED);
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toMatch(/\S/);
      expect(await sandboxList()).toEqual([]);
    } finally {
      server.kill('SIGTERM');
      expect((await server).exitCode).toBe(0);
    }
  });

  it('a different AGENTFENSE_* environment runs in-process instead', async () => {
    const r = await runSh([], 'echo in-process', { env: { AGENTFENSE_BWRAP_LAUNCHER: '0' } });
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe('in-process');
    expect(r.stderr).not.toContain(HANDED);
    expect(r.stderr).toContain('data directory open');
    expect(await waitForReapers(data)).toBe(true);
  });

  it('a different umask, resource limits or LD_* environment run in-process (the helper cannot apply them per run)', async () => {
    const dir = join(scratch, 'umask');
    await mkdir(dir);
    // Through `sh -c '<setting>; exec node …'`: the client inherits the setting as a user's shell gives it.
    const under = (setting: string, flags: string[], script: string, env: Record<string, string> = {}) =>
      execa(
        'sh',
        [
          '-c',
          `${setting}; exec "$@"`,
          'sh',
          process.execPath,
          bin,
          'run',
          ...flags,
          '--data',
          data,
          '-v',
          '--',
          'sh',
          '-c',
          script,
        ],
        { reject: false, env: { ...ON, ...env } },
      );
    const masked = await under(
      'umask 077',
      [dir, '--preset', 'full-access', '--commit'],
      'mkdir /workspace/d; echo y > /workspace/f',
    );
    expect(masked.exitCode).toBe(0);
    expect(masked.stderr).not.toContain(HANDED);
    expect((await stat(join(dir, 'f'))).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, 'd'))).mode & 0o777).toBe(0o700);
    const limited = await under('ulimit -n 512', [repo], 'ulimit -n');
    expect([limited.exitCode, limited.stdout]).toEqual([0, '512']);
    expect(limited.stderr).not.toContain(HANDED);
    const preload = await under('true', [repo], 'echo ok', { LD_LIBRARY_PATH: '/nonexistent' });
    expect([preload.exitCode, preload.stdout]).toEqual([0, 'ok']);
    expect(preload.stderr).not.toContain(HANDED);
    // And the helper still serves the caller whose settings it has.
    const same = await runSh([], 'echo same');
    expect(same.stderr).toContain(HANDED);
    expect(await waitForReapers(data)).toBe(true);
  });

  it('from a removed working directory: in-process with an absolute DIR, a clear error with a relative one', async () => {
    const gone = join(scratch, 'gone');
    const fromGone = (dir: string) =>
      execa(
        'sh',
        [
          '-c',
          `mkdir "$0" && cd "$0" && rmdir "$0" && exec "$@"`,
          gone,
          process.execPath,
          bin,
          'run',
          dir,
          '--data',
          data,
          '-v',
          '--',
          'echo',
          'hi',
        ],
        { reject: false, env: ON },
      );
    const absolute = await fromGone(repo);
    expect([absolute.exitCode, absolute.stdout]).toEqual([0, 'hi']);
    expect(absolute.stderr).not.toContain(HANDED); // the client cannot tell the helper its cwd
    expect(absolute.stderr).not.toMatch(/internal error|uv_cwd|at /);
    const relative = await fromGone('repo');
    expect(relative.exitCode).toBe(2);
    expect(relative.stderr).toContain('the current directory can not be read');
    expect(relative.stderr).toContain('give DIR and --rules as absolute paths');
    expect(relative.stderr).not.toContain('internal error');
    expect(await waitForReapers(data)).toBe(true);
  });

  it('AGENTFENSE_RUN_HELPER=0 runs in-process and starts no helper', async () => {
    const fresh = join(scratch, 'off');
    await mkdir(fresh);
    const r = await runSh([], 'echo off', { dataDir: fresh, env: { AGENTFENSE_RUN_HELPER: '0' } });
    expect([r.exitCode, r.stdout]).toEqual([0, 'off']);
    expect(await waitForReapers(fresh)).toBe(true);
    expect(await exists(join(fresh, 'run-helper.sock'))).toBe(false);
    expect(await helperPids(fresh)).toEqual([]);
  });

  // Last in this block: the helper of `data` stops taking runs after it.
  it('a build change lets runs in progress finish; new runs go in-process', async () => {
    const long = execa(
      process.execPath,
      [bin, 'run', repo, '--data', data, '-v', '--', 'sh', '-c', 'sleep 3; echo long-finished'],
      {
        reject: false,
        env: ON,
      },
    );
    await new Promise<void>((resolve, reject) => {
      let seen = '';
      long.stderr.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        if (seen.includes('started (worker mounted')) resolve();
      });
      void long.then(() => reject(new Error(`run ended early: ${seen}`)));
    });
    // What `pnpm build` does to the helper's build stamp (run-helper/build-stamp.ts).
    const addon = `${root}packages/control/dist/peercred.node`;
    const now = new Date();
    await utimes(addon, now, now);
    const second = await runSh([], 'echo second');
    expect([second.exitCode, second.stdout]).toEqual([0, 'second']);
    expect(second.stderr).not.toContain(HANDED);
    const first = await long;
    expect(first.stderr).toContain(HANDED);
    expect(first.stderr).not.toContain('SIGTERM');
    expect([first.exitCode, first.stdout]).toEqual([0, 'long-finished']);
    await until('the old helper to exit', async () => {
      const log = await readFile(join(data, 'logs', 'control.log'), 'utf8');
      return log.includes('the build on disk changed') && (await helperPids(data)).length <= 1;
    });
    expect(await waitForReapers(data)).toBe(true);
  });
});

describe('the run helper exits and leaves nothing', () => {
  it('when idle', async () => {
    const dir = join(scratch, 'idle');
    // Long enough for a freshly started client to reach the helper on a loaded machine.
    await firstRun(dir, { AGENTFENSE_RUN_HELPER_IDLE: '8' });
    const served = await runSh([], 'echo once', { dataDir: dir, env: { AGENTFENSE_RUN_HELPER_IDLE: '8' } });
    expect(served.stderr).toContain(HANDED);
    await until('the idle helper to exit', async () => (await helperPids(dir)).length === 0, 30_000);
    expect(await exists(join(dir, 'run-helper.sock'))).toBe(false);
    expect(await nothingLeft(dir)).toBe(true);
    expect(await sandboxList(dir)).toEqual([]);
  });

  it('when its data directory is removed', async () => {
    const dir = join(scratch, 'removed');
    await firstRun(dir);
    const pids = await helperPids(dir);
    expect(pids).toHaveLength(1);
    expect(await waitForReapers(dir)).toBe(true);
    await rm(dir, { recursive: true, force: true });
    await until('the helper to exit', async () => (await helperPids(dir)).length === 0);
    expect((await listMounts()).filter((m) => m.mountpoint.startsWith(dir))).toEqual([]);
    // Its idle worker went with it.
    const workers = await execa('pgrep', ['-f', `worker.*${dir}`], { reject: false });
    expect(workers.stdout).toBe('');
  });

  it('SIGKILLed, its stale socket does not keep a new helper from starting', async () => {
    const dir = join(scratch, 'killed');
    await firstRun(dir);
    const [pid] = await helperPids(dir);
    expect(pid).toBeDefined();
    process.kill(pid as number, 'SIGKILL');
    await until('the helper to die', async () => (await helperPids(dir)).length === 0);
    expect(await exists(join(dir, 'run-helper.sock'))).toBe(true); // nobody removed it
    // Refused at the stale socket: in-process, and it starts a new helper, which replaces the socket.
    const recovered = await runSh([], 'echo recovered', { dataDir: dir });
    expect([recovered.exitCode, recovered.stdout]).toEqual([0, 'recovered']);
    expect(recovered.stderr).not.toContain(HANDED);
    await until('a new helper', async () => (await helperPids(dir)).length === 1);
    await until('the new helper to answer', async () => {
      const log = await readFile(join(dir, 'logs', 'control.log'), 'utf8');
      return log.split('\n').filter((l) => l.includes('run helper ready')).length === 2;
    });
    const handed = await runSh([], 'echo handed', { dataDir: dir });
    expect([handed.exitCode, handed.stdout]).toEqual([0, 'handed']);
    expect(handed.stderr).toContain(HANDED);
    await stopHelper(dir);
  });

  it("works in / (not the first run's cwd, which it would keep busy, e.g. for umount)", async () => {
    const dir = join(scratch, 'cwd');
    const first = await execa(process.execPath, [bin, 'run', repo, '--data', dir, '--', 'true'], {
      reject: false,
      cwd: scratch,
      env: ON,
    });
    expect(first.exitCode).toBe(0);
    await until('the helper', async () => (await helperPids(dir)).length === 1);
    const [pid] = await helperPids(dir);
    expect(await readlink(`/proc/${pid}/cwd`)).toBe('/');
    await stopHelper(dir);
  });

  it('two helpers started at once: one serves, the other exits before opening anything', async () => {
    const dir = join(scratch, 'twice');
    await mkdir(dir, { mode: 0o700 });
    const entry = `${root}packages/control/dist/cli/run-helper/main.js`;
    const start = () =>
      execa(process.execPath, [entry, '--data', dir], { reject: false, env: { ...process.env, ...ON } });
    const [a, b] = [start(), start()];
    // One exits at once (it did not get the data directory's lock); the other serves.
    await Promise.race([a, b]);
    await until('the socket', () => exists(join(dir, 'run-helper.sock')));
    const r = await runSh([], 'echo once', { dataDir: dir });
    expect(r.stderr).toContain(HANDED);
    const log = await readFile(join(dir, 'logs', 'control.log'), 'utf8');
    expect(log.split('\n').filter((l) => l.includes('run helper ready'))).toHaveLength(1);
    expect(await helperPids(dir)).toHaveLength(1);
    await stopHelper(dir);
    await Promise.all([a, b]);
  });

  it('on SIGTERM, and the next run starts a new one', async () => {
    const dir = join(scratch, 'term');
    await firstRun(dir);
    await stopHelper(dir);
    expect(await exists(join(dir, 'run-helper.sock'))).toBe(false);
    await firstRun(dir); // in-process again, and a new helper
    const r = await runSh([], 'echo again', { dataDir: dir });
    expect([r.exitCode, r.stdout]).toEqual([0, 'again']);
    expect(r.stderr).toContain(HANDED);
  });
});

describe('spare sandboxes (on by default; AGENTFENSE_RUN_HELPER_SPARE=0 turns them off)', () => {
  // No AGENTFENSE_RUN_HELPER_SPARE at all: what a user gets.
  const base = ON_DEFAULT;
  const RESERVED = /label key agentfense\.spare is reserved for the run helper's spare sandboxes/;
  /** The sandboxed `sleep <marker>` itself (not the client, whose command line also holds it). */
  const sleeperRuns = async (marker: string): Promise<boolean> =>
    (await execa('pgrep', ['-f', `^sleep ${marker}$`], { reject: false })).exitCode === 0;

  it('an idle spare is not listed (only with its label filter); a taken one is listed as any run', async () => {
    const dir = join(scratch, 'spare-list');
    const flags = ['--label', 'team=blue'];
    await firstRun(dir, {}, { base, flags });
    // The first run through the helper starts its own and leaves a spare for the next one.
    const second = await runSh(flags, 'true', { dataDir: dir, base });
    expect(second.stderr).toContain(HANDED);
    expect(second.stderr).toContain('created');
    await until('the spare', async () => (await spareList(dir)).length === 1);
    const [idle] = await spareList(dir);
    expect(idle?.state).toBe('RUNNING');
    expect(idle?.labels).toEqual({ team: 'blue', 'agentfense.run': 'true', 'agentfense.spare': 'true' });
    expect(await sandboxList(dir)).toEqual([]);
    expect(await sandboxList(dir, ['--label', 'team=blue'])).toEqual([]);
    expect(await sandboxList(dir, ['--state', 'RUNNING'])).toEqual([]);

    // Taken: during its run it is listed without the reserved label, as an in-process run's sandbox is.
    const marker = '6.0173';
    const child = execa(
      process.execPath,
      [bin, 'run', repo, '--data', dir, '-v', ...flags, '--', 'sleep', marker],
      { reject: false, env: base },
    );
    await until('the sleeper', () => sleeperRuns(marker));
    const during = await sandboxList(dir);
    expect(during.map((s) => [s.id, s.state, s.labels])).toEqual([
      [idle?.id, 'RUNNING', { team: 'blue', 'agentfense.run': 'true' }],
    ]);
    expect(await sandboxList(dir, ['--label', 'team=blue'])).toHaveLength(1);
    expect(await spareList(dir)).toEqual([]);
    const done = await child;
    expect(done.exitCode).toBe(0);
    expect(done.stderr).toContain(`took started sandbox ${idle?.id}`);

    // The in-process path reports the same labels for the same flags.
    const inProcess = execa(
      process.execPath,
      [bin, 'run', repo, '--data', dir, ...flags, '--', 'sleep', '6.0174'],
      { reject: false, env: { ...base, AGENTFENSE_RUN_HELPER: '0' } },
    );
    await until('the in-process sleeper', () => sleeperRuns('6.0174'));
    const listedInProcess = await sandboxList(dir);
    expect(listedInProcess.map((s) => s.labels)).toEqual([{ team: 'blue', 'agentfense.run': 'true' }]);
    expect((await inProcess).exitCode).toBe(0);

    // The reserved key is refused from users, through the helper and in-process alike.
    for (const env of [base, { ...base, AGENTFENSE_RUN_HELPER: '0' }]) {
      const refused = await runSh(['--label', 'agentfense.spare=true'], 'true', { dataDir: dir, base: env });
      expect(refused.exitCode).toBe(2);
      expect(refused.stderr).toMatch(RESERVED);
    }
    await stopHelper(dir);
    expect(await sandboxList(dir)).toEqual([]);
    expect(await spareList(dir)).toEqual([]);
    expect(await nothingLeft(dir)).toBe(true);
  });

  it('a spare sees the directory as it is when taken, and nothing of an earlier run', async () => {
    const dir = join(scratch, 'spare-fresh');
    const tree = join(scratch, 'spare-repo');
    await execa('cp', ['-a', `${root}examples/demo-repo`, tree]);
    const opts = { dataDir: dir, base, repoDir: tree };
    await firstRun(dir, {}, { base, repoDir: tree });
    // This run leaves a delta (not committed), then the helper starts the spare.
    const writer = await runSh([], 'echo first > /workspace/output/first-delta.txt', opts);
    expect(writer.exitCode).toBe(0);
    await until('the spare', async () => (await spareList(dir)).length === 1);

    // Changed on the host after the spare was mounted: content and size, content at the same size,
    // mode, a file replaced by a directory, a file added, a file removed.
    const readme = 'README rewritten after the spare was mounted, longer than it was before.\n';
    await writeFile(join(tree, 'README.md'), readme);
    const settings = await readFile(join(tree, 'config', 'settings.json'), 'utf8');
    const sameSize = 'X'.repeat(settings.length - 1) + '\n';
    await writeFile(join(tree, 'config', 'settings.json'), sameSize);
    await execa('chmod', ['0750', join(tree, 'src', 'app.py')]);
    await rm(join(tree, 'docs', 'architecture.md'));
    await mkdir(join(tree, 'docs', 'architecture.md'));
    await writeFile(join(tree, 'docs', 'architecture.md', 'inside.txt'), 'inside\n');
    await writeFile(join(tree, 'added-later.txt'), 'later\n');
    await rm(join(tree, 'output', 'README.md'));

    const script = [
      'cat /workspace/README.md',
      'cat /workspace/config/settings.json',
      'stat -c "%n %s %a %F" /workspace/README.md /workspace/src/app.py /workspace/docs/architecture.md',
      'cat /workspace/docs/architecture.md/inside.txt /workspace/added-later.txt',
      'echo "output: $(ls -A /workspace/output | tr "\\n" " ")"',
      'echo second > /workspace/output/second-delta.txt',
    ].join('; ');
    const taken = await runSh([], script, opts);
    expect(taken.stderr).toContain('took started sandbox');
    expect(taken.exitCode).toBe(0);
    // A directory's size is the host filesystem's; its line is checked apart.
    const notDocs = (lines: string[]): string[] => lines.filter((l) => !l.startsWith('/workspace/docs/'));
    expect(notDocs(taken.stdout.split('\n'))).toEqual([
      ...readme.trimEnd().split('\n'),
      sameSize.trimEnd(),
      `/workspace/README.md ${Buffer.byteLength(readme)} 444 regular file`,
      '/workspace/src/app.py 315 550 regular file',
      'inside',
      'later',
      'output: ',
    ]);
    expect(taken.stdout).toMatch(/^\/workspace\/docs\/architecture\.md \d+ 555 directory$/m);

    // The next spare (started after that run) has nothing of its delta either.
    await until('the next spare', async () => (await spareList(dir)).length === 1);
    const again = await runSh([], 'echo "output: $(ls -A /workspace/output | tr "\\n" " ")"', opts);
    expect(again.stderr).toContain('took started sandbox');
    expect(again.stdout.trim()).toBe('output:');

    // The directory itself replaced (same path, another inode): the spare's worker may hold the old one,
    // so it is not taken, and the run sees the new directory.
    await until('the spare after that', async () => (await spareList(dir)).length === 1);
    await rm(tree, { recursive: true });
    await mkdir(join(tree, 'output'), { recursive: true });
    await writeFile(join(tree, 'README.md'), 'a new directory at the same path\n');
    const replaced = await runSh([], 'cat /workspace/README.md', opts);
    expect(replaced.exitCode).toBe(0);
    expect(replaced.stderr).not.toContain('took started sandbox');
    expect(replaced.stdout).toBe('a new directory at the same path');

    // Other options: the spare is not taken, and the run gets what it asked for.
    await until('the spare for the new directory', async () => (await spareList(dir)).length === 1);
    const other = await runSh(['--preset', 'read-only'], 'echo x > /workspace/output/ro.txt', opts);
    expect(other.stderr).not.toContain('took started sandbox');
    expect(other.exitCode).not.toBe(0);
    expect(other.stderr).toMatch(/Read-only file system|Permission denied/);
    // SIGTERM: the spare is destroyed with the helper; nothing listed, mounted or running.
    await stopHelper(dir);
    expect(await spareList(dir)).toEqual([]);
    expect(await nothingLeft(dir)).toBe(true);
  });

  it('AGENTFENSE_RUN_HELPER_SPARE=0: no spare is started', async () => {
    const dir = join(scratch, 'spare-off');
    await firstRun(dir);
    const r = await runSh([], 'true', { dataDir: dir });
    expect(r.stderr).toContain(HANDED);
    // The run's own teardown is done once nothing is left; no spare came after it.
    await until('the teardown', () => nothingLeft(dir));
    await sleep(1000);
    expect(await spareList(dir)).toEqual([]);
    expect(await nothingLeft(dir)).toBe(true);
    await stopHelper(dir);
  });
});
