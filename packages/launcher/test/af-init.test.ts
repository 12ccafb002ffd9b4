// af-init (native/af-init.c) and its host client (src/) against each other: the real static
// binary, started as a child with its connection on fd 3 (a socketpair: Node's stdio 'pipe'), as the bwrap
// runtime starts it. What the host sees of each duty of the protocol (src/frames.ts).
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import type { Socket } from 'node:net';
import { finished } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AF_INIT_PATH, LauncherClient, afInitPath } from '../src/index.js';
import type { LauncherCommand, LauncherOutcome } from '../src/index.js';

const BUILD = fileURLToPath(new URL('../scripts/build-af-init.js', import.meta.url));
const PATH_ENV = { PATH: '/usr/local/bin:/usr/bin:/bin' };

interface Started {
  readonly child: ChildProcess;
  readonly client: LauncherClient;
  readonly exited: Promise<number | null>;
}

const children: ChildProcess[] = [];

async function startInit(): Promise<Started> {
  const child = spawn(afInitPath(), ['--fd', '3'], { stdio: ['ignore', 'ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const client = await LauncherClient.connect(child.stdio[3] as Socket);
  void exited.then(() => (stderr ? undefined : undefined));
  return { child, client, exited };
}

async function collect(
  cmd: LauncherCommand,
): Promise<{ out: string; err: string; outcome: LauncherOutcome }> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  cmd.stdout.on('data', (c: Buffer) => out.push(c));
  cmd.stderr.on('data', (c: Buffer) => err.push(c));
  const outcome = await cmd.done;
  // `done` can settle before buffered output was emitted: the streams' own end is the signal for that.
  await Promise.all([finished(cmd.stdout), finished(cmd.stderr)]);
  return { out: Buffer.concat(out).toString(), err: Buffer.concat(err).toString(), outcome };
}

function alive(pid: number): boolean {
  try {
    // A zombie is dead for our purpose: its state is Z.
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

/** Whether `pid` is in a stopped state; throws once it is a zombie or gone (it will never stop then). */
function stopped(pid: number): boolean {
  const state = /^State:\s+(\S)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (state === 'Z' || state === 'X') throw new Error(`${String(pid)} is gone`);
  return state === 'T' || state === 't';
}

async function until(check: () => boolean, ms = 5_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (check()) return true;
    await sleep(20);
  }
  return check();
}

beforeAll(() => {
  execFileSync(process.execPath, [BUILD], { stdio: 'inherit' });
});

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }
});

describe('af-init', () => {
  it('is a static binary (runs in any image)', () => {
    const file = readFileSync(AF_INIT_PATH);
    expect(file.subarray(1, 4).toString()).toBe('ELF');
    // A dynamic executable has a PT_INTERP program header naming its loader; a static one has none.
    expect(file.includes(Buffer.from('/lib64/ld-linux'))).toBe(false);
  });

  it('says READY with its pid, runs a command, and reports output and exit code', async () => {
    const { child, client } = await startInit();
    expect(client.pid).toBe(child.pid);
    const cmd = client.spawn({
      argv: ['sh', '-c', 'echo out; echo err >&2; exit 7'],
      cwd: '/',
      env: PATH_ENV,
    });
    expect(await cmd.pid).toBeGreaterThan(0);
    expect(await collect(cmd)).toEqual({ out: 'out\n', err: 'err\n', outcome: { kind: 'exited', code: 7 } });
    await client.ping();
  });

  it('reports a death by signal', async () => {
    const { client } = await startInit();
    const cmd = client.spawn({ argv: ['sh', '-c', 'kill -9 $$'], cwd: '/', env: PATH_ENV });
    expect((await collect(cmd)).outcome).toEqual({ kind: 'signaled', signal: 9 });
  });

  it('reports a command that never started as FAILED with errno, and no exit', async () => {
    const { client } = await startInit();
    const missing = await collect(client.spawn({ argv: ['no-such-program-af'], cwd: '/', env: PATH_ENV }));
    expect(missing.outcome).toMatchObject({
      kind: 'failed',
      errno: 2,
      message: expect.stringMatching(/^exec: /) as unknown,
    });
    const badCwd = client.spawn({ argv: ['true'], cwd: '/no/such/dir', env: PATH_ENV });
    expect(await badCwd.pid).toBeNull();
    expect((await collect(badCwd)).outcome).toMatchObject({
      kind: 'failed',
      errno: 2,
      message: expect.stringMatching(/^chdir: /) as unknown,
    });
    const notExecutable = await collect(client.spawn({ argv: ['/etc/passwd'], cwd: '/', env: {} }));
    expect(notExecutable.outcome).toMatchObject({ kind: 'failed', errno: 13 });
    // The connection is still fine.
    expect((await collect(client.spawn({ argv: ['true'], cwd: '/', env: PATH_ENV }))).outcome.kind).toBe(
      'exited',
    );
  });

  it('passes exactly the given environment and cwd, and searches the default PATH when none is given', async () => {
    const { client } = await startInit();
    const env = await collect(client.spawn({ argv: ['env'], cwd: '/tmp', env: { A: '1', B: 'x y' } }));
    expect(env.out).toBe('A=1\nB=x y\n');
    const pwd = await collect(client.spawn({ argv: ['pwd'], cwd: '/tmp', env: {} }));
    expect(pwd.out).toBe('/tmp\n');
    // PATH from the command's env, not af-init's: a PATH without `true` fails the lookup.
    const noTrue = await collect(client.spawn({ argv: ['true'], cwd: '/', env: { PATH: '/nonexistent' } }));
    expect(noTrue.outcome).toMatchObject({ kind: 'failed', errno: 2 });
  });

  it('never interprets a shell string: argv goes to execve as is', async () => {
    const { client } = await startInit();
    const r = await collect(
      client.spawn({ argv: ['echo', '$(id)', ';', '`x`', '*'], cwd: '/', env: PATH_ENV }),
    );
    expect(r.out).toBe('$(id) ; `x` *\n');
  });

  it('runs each command in its own session with default signals, no mask, and only fds 0-2 (stdin a pipe here)', async () => {
    const { client } = await startInit();
    // `cat` echoing a line is idle in read() afterwards: its loader has closed what it opened by then.
    const cmd = client.spawn({ argv: ['cat'], cwd: '/', env: PATH_ENV, stdin: true });
    const pid = (await cmd.pid)!;
    cmd.stdin!.write('ready\n');
    await new Promise((resolve) => cmd.stdout.once('data', resolve));
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    expect(Number(fields[3])).toBe(pid); // session id (field 6)
    expect(Number(fields[2])).toBe(pid); // process group (field 5)
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    expect(status).toMatch(/^SigBlk:\s+0+$/m);
    expect(status).toMatch(/^SigIgn:\s+0+$/m);
    expect(readdirSync(`/proc/${pid}/fd`).sort()).toEqual(['0', '1', '2']);
    expect(readFileSync(`/proc/${pid}/environ`, 'utf8')).toBe('PATH=/usr/local/bin:/usr/bin:/bin\0');
    cmd.signal('SIGKILL');
    expect((await cmd.done).kind).toBe('signaled');
  });

  it('feeds stdin from STDIN frames and closes it on end; without a pipe stdin is /dev/null', async () => {
    const { client } = await startInit();
    const cat = client.spawn({ argv: ['cat'], cwd: '/', env: PATH_ENV, stdin: true });
    const big = Buffer.alloc(3 * 1024 * 1024 + 5, 'a'); // spans several STDIN frames and pipe buffers
    cat.stdin!.write('hello ');
    cat.stdin!.end(big);
    const r = await collect(cat);
    expect(r.out.length).toBe(6 + big.length);
    expect(r.out.startsWith('hello aaa')).toBe(true);
    expect(r.outcome).toEqual({ kind: 'exited', code: 0 });
    const devnull = await collect(client.spawn({ argv: ['cat'], cwd: '/', env: PATH_ENV }));
    expect(devnull).toEqual({ out: '', err: '', outcome: { kind: 'exited', code: 0 } });
  });

  it('SIGNAL reaches the whole process group of the command', async () => {
    const { client } = await startInit();
    const cmd = client.spawn({ argv: ['sh', '-c', 'sleep 30 & echo $!; wait'], cwd: '/', env: PATH_ENV });
    const bg = await new Promise<number>((resolve) =>
      cmd.stdout.once('data', (d: Buffer) => resolve(Number(d.toString()))),
    );
    expect(alive(bg)).toBe(true);
    cmd.signal('SIGTERM');
    expect(await cmd.done).toEqual({ kind: 'signaled', signal: 15 });
    expect(await until(() => !alive(bg))).toBe(true);
  });

  it('sends EXIT when the command is reaped, without waiting for background writers to close its pipes', async () => {
    const { client } = await startInit();
    const started = Date.now();
    const r = await collect(
      client.spawn({ argv: ['sh', '-c', 'sleep 20 & echo now'], cwd: '/', env: PATH_ENV }),
    );
    expect(r.out).toBe('now\n');
    expect(r.outcome).toEqual({ kind: 'exited', code: 0 });
    expect(Date.now() - started).toBeLessThan(15_000); // not the background sleep's 20 s
  });

  it('applies backpressure: a command whose output the host does not read cannot run ahead', async () => {
    const { client } = await startInit();
    const total = 64 * 1024 * 1024;
    const cmd = client.spawn({ argv: ['head', '-c', String(total), '/dev/zero'], cwd: '/', env: PATH_ENV });
    await cmd.pid;
    // Nobody reads stdout: af-init's queue, the socket and the stream's buffer fill, then the pipe, then
    // `head` blocks. Without flow control it would finish in well under a second.
    let finished = false;
    void cmd.done.then(() => (finished = true));
    await sleep(1_500);
    expect(finished).toBe(false);
    let got = 0;
    cmd.stdout.on('data', (c: Buffer) => (got += c.length));
    expect(await cmd.done).toEqual({ kind: 'exited', code: 0 });
    expect(got).toBe(total);
  });

  it('runs many commands at once on one connection', async () => {
    const { client } = await startInit();
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        collect(client.spawn({ argv: ['sh', '-c', `echo ${i}; exit ${i % 5}`], cwd: '/', env: PATH_ENV })),
      ),
    );
    results.forEach((r, i) =>
      expect(r).toEqual({ out: `${i}\n`, err: '', outcome: { kind: 'exited', code: i % 5 } }),
    );
  });

  it('kills every command and exits 1 when the host closes the connection', async () => {
    const { client, exited } = await startInit();
    const cmd = client.spawn({ argv: ['sh', '-c', 'sleep 30 & echo $!; wait'], cwd: '/', env: PATH_ENV });
    const pid = (await cmd.pid)!;
    const bg = await new Promise<number>((resolve) =>
      cmd.stdout.once('data', (d: Buffer) => resolve(Number(d.toString()))),
    );
    client.close();
    await expect(cmd.done).rejects.toMatchObject({ code: 'AF_UNAVAILABLE' });
    expect(await exited).toBe(1);
    expect(await until(() => !alive(pid) && !alive(bg))).toBe(true);
  });

  it('kills every command and exits 1 on a malformed frame from the host', async () => {
    const { child, client, exited } = await startInit();
    const cmd = client.spawn({ argv: ['sleep', '30'], cwd: '/', env: PATH_ENV });
    const pid = (await cmd.pid)!;
    const socket = child.stdio[3] as Socket;
    const frame = Buffer.alloc(9);
    frame.writeUInt32LE(0xffff_ffff, 0); // a length over the protocol's 1 MiB + 16
    socket.write(frame);
    expect(await exited).toBe(1);
    expect(await until(() => !alive(pid))).toBe(true);
    await expect(cmd.done).rejects.toMatchObject({ code: 'AF_UNAVAILABLE' });
  });

  it('a killed af-init fails pending commands and pings with a clear error instead of hanging', async () => {
    const { child, client } = await startInit();
    const cmd = client.spawn({ argv: ['sleep', '30'], cwd: '/', env: PATH_ENV });
    const pid = (await cmd.pid)!;
    child.kill('SIGKILL');
    await expect(cmd.done).rejects.toThrow(/launcher \(af-init\) closed its connection/);
    await expect(client.ping()).rejects.toMatchObject({ code: 'AF_UNAVAILABLE' });
    expect(() => client.spawn({ argv: ['true'], cwd: '/', env: {} })).toThrow(/launcher/);
    expect(client.alive).toBe(false);
    process.kill(-pid, 'SIGKILL'); // its own session outlived it (not pid 1 here): ours to clean up
  });

  it('a SIGNAL sent right after its SPAWN reaches the command (before its setsid there is no group yet)', async () => {
    const { client } = await startInit();
    for (let round = 0; round < 5; round++) {
      const cmd = client.spawn({ argv: ['sleep', '30'], cwd: '/', env: PATH_ENV });
      cmd.signal('SIGKILL'); // in the same tick: af-init reads both frames together
      const started = Date.now();
      expect((await collect(cmd)).outcome).toEqual({ kind: 'signaled', signal: 9 });
      expect(Date.now() - started).toBeLessThan(10_000);
    }
  });

  it('a command stopped between fork and exec is killed at its start deadline and reported FAILED', async () => {
    // Inside a sandbox any process of the agent can SIGSTOP the next pid (pids are sequential) before it
    // reaches execve; the host waits for STARTED/FAILED before it can name the command to kill. Here the
    // test plays the agent: it stops each child of af-init it finds still running af-init's own image.
    const { child, client } = await startInit();
    const initPid = child.pid!;
    const childrenFile = `/proc/${String(initPid)}/task/${String(initPid)}/children`;
    let caught: LauncherCommand | null = null;
    // Tries for up to 30 s; a miss costs only the 50 ms poll plus a `true` (a longer command made each miss
    // cost a second, and a loaded CI machine ran out of the test's time before a stop landed).
    const giveUpAt = Date.now() + 30_000;
    let attempts = 0;
    for (; Date.now() < giveUpAt && caught === null; attempts++) {
      const cmd = client.spawn({ argv: ['true'], cwd: '/', env: PATH_ENV });
      const until = Date.now() + 50;
      while (caught === null && Date.now() < until) {
        for (const pid of readFileSync(childrenFile, 'utf8').split(' ').filter(Boolean).map(Number)) {
          const comm = () => readFileSync(`/proc/${String(pid)}/comm`, 'utf8').trim();
          try {
            if (comm() !== 'af-init') continue;
            process.kill(pid, 'SIGSTOP');
            // The stop takes effect only when the child next returns to user space, which may be right after
            // an execve already under way: read its image only once it is stopped. Still af-init's image:
            // stopped before its exec, the attack took.
            while (!stopped(pid)) {
              // spin: a stop lands within microseconds
            }
            if (comm() === 'af-init') caught = cmd;
            else process.kill(pid, 'SIGCONT');
          } catch {
            // gone already
          }
        }
      }
      if (caught === null) await collect(cmd);
    }
    expect(caught, `no child was stopped before its exec in ${String(attempts)} tries (30 s)`).not.toBeNull();
    const started = Date.now();
    const { outcome } = await collect(caught!);
    expect(outcome).toMatchObject({ kind: 'failed', errno: 110 }); // ETIMEDOUT
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(await caught!.pid).toBeNull();
    // af-init carries on.
    expect((await collect(client.spawn({ argv: ['true'], cwd: '/', env: PATH_ENV }))).outcome.kind).toBe(
      'exited',
    );
  }, 60_000);

  it('rejects input af-init could not carry, before sending anything', async () => {
    const { client } = await startInit();
    expect(() => client.spawn({ argv: [], cwd: '/', env: {} })).toThrow(/argv/);
    expect(() => client.spawn({ argv: ['a\0b'], cwd: '/', env: {} })).toThrow(/NUL/);
    expect(() => client.spawn({ argv: ['true'], cwd: '/', env: { 'A=B': '1' } })).toThrow(/environment/);
    await client.ping();
  });
});
