// The one-shot CLI's run helper (packages/control/src/cli/run-helper/) runs root's commands for whoever
// reaches its socket. Attacks: another local user connects and asks for a run. Two defences, each tested
// alone: the socket's modes (0600 in a 0700 data directory: connect fails with EACCES), and, should those
// modes ever be loosened, the kernel's record of the peer (SO_PEERCRED): the helper closes a connection
// from another uid before reading a request. The other way round, the client sends its request (argv,
// environment, stdin) only to a helper of its own: a socket file of its own uid and mode in a data
// directory of its own, and, on the connection, a listener of its own uid (SO_PEERCRED). And the helper's
// commands run as the sandbox user, never as host root (the same runtime path as an in-process run).
import { chmod, chown, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listMounts } from '@agentfense/fuse-worker';
import { processTraits, relevantEnv } from '../../packages/control/src/cli/run-helper/protocol.js';
import { waitForReapers } from '../helpers/reapers.js';
import { createLocalUser, removeLocalUser } from '../helpers/local-user.js';
import type { HostUser } from '../helpers/local-user.js';
import { startHelper, stopHelper } from '../helpers/run-helper.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const ON = { AGENTFENSE_RUN_HELPER: '1', AGENTFENSE_RUN_HELPER_IDLE: '120' };

let scratch: string;
let repo: string;
let data: string;
let socket: string;
let user: HostUser | undefined;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'af-sec-helper-'));
  repo = join(scratch, 'repo');
  data = join(scratch, 'data');
  socket = join(data, 'run-helper.sock');
  await execa('mkdir', ['-p', join(repo, 'output')]);
  await writeFile(join(repo, 'README.md'), 'hi\n');
  user = await createLocalUser();
  // The first run works in-process and leaves the helper.
  await startHelper([bin, 'run', repo, '--data', data, '--', 'true'], data, ON);
});

afterAll(async () => {
  await stopHelper(data);
  expect(await waitForReapers(data)).toBe(true);
  await removeLocalUser(user);
  const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
  await rm(scratch, { recursive: true, force: true });
  expect(left).toEqual([]);
});

/**
 * Connects to the helper's socket (as `as`, or as root) and sends a well-formed request for a run that
 * prints a marker: what a client would send, with the helper's own environment so that nothing but the
 * connection's owner can make it refuse. Returns what came back.
 */
interface Outcome {
  readonly connected: boolean;
  readonly error?: string;
  readonly types: number[];
  readonly text: string;
}

async function attack(as: HostUser | undefined): Promise<Outcome> {
  const request = JSON.stringify({
    argv: ['run', repo, '--data', data, '--', 'sh', '-c', 'echo REACHED-$(id -u)'],
    cwd: '/',
    dataDir: data,
    env: relevantEnv({ ...process.env, ...ON }),
    clientMs: 0,
    stdoutIsTTY: false,
    stderrIsTTY: false,
    traits: processTraits(), // the test's node: the same umask and limits as the helper's
  });
  const script = `
    const net = require('node:net');
    const s = net.connect(process.argv[1]);
    const got = [];
    let connected = false;
    const report = (error) => {
      const all = Buffer.concat(got);
      const types = [];
      for (let at = 0; at + 5 <= all.length; at += 4 + all.readUInt32LE(at)) types.push(all[at + 4]);
      console.log(JSON.stringify({ connected, error, types, text: all.toString('latin1') }));
      process.exit(0);
    };
    s.on('connect', () => {
      connected = true;
      const body = Buffer.from(process.argv[2]);
      const head = Buffer.alloc(5);
      head.writeUInt32LE(body.length + 1, 0);
      head[4] = 1;
      s.write(Buffer.concat([head, body]));
    });
    s.on('data', (c) => got.push(c));
    s.on('error', (e) => report(e.code));
    s.on('close', () => report(undefined));`;
  const r = await execa(process.execPath, ['-e', script, socket, request], {
    cwd: '/',
    env: { ...process.env, ...ON },
    ...(as === undefined ? {} : { uid: as.uid, gid: as.gid }),
  });
  return JSON.parse(r.stdout) as Outcome;
}

describe('the run helper socket', () => {
  it('the client trusts only a 0600 socket of its own uid: otherwise it runs in-process', async () => {
    // Someone else's socket at the path (a data directory under a shared parent): the client must not
    // send it argv, environment and stdin, nor write what it answers to the user's terminal.
    const run = () =>
      execa(process.execPath, [bin, 'run', repo, '--data', data, '-v', '--', 'echo', 'x'], {
        reject: false,
        env: ON,
      });
    const handed = await run();
    expect(handed.stderr).toContain('handed to the run helper'); // control
    await chown(socket, user?.uid ?? 65534, user?.gid ?? 65534);
    try {
      const r = await run();
      expect([r.exitCode, r.stdout]).toEqual([0, 'x']);
      expect(r.stderr).not.toContain('handed to the run helper');
    } finally {
      await chown(socket, 0, 0);
    }
    await chmod(socket, 0o666);
    try {
      const r = await run();
      expect(r.stderr).not.toContain('handed to the run helper');
    } finally {
      await chmod(socket, 0o600);
    }
    expect(await waitForReapers(data)).toBe(true);
  });
  it('the client sends nothing to a listener of another uid behind a socket file of its own', async () => {
    // Every path check passes (a socket of root's, 0600, in a 0700 data directory of root's), but the
    // process listening on it is another user's: it listened in a directory of its own and the socket
    // was then moved into place (a rename keeps the binding). Only SO_PEERCRED on the connection tells.
    const other = user as HostUser;
    const dir = join(scratch, 'foreign-data');
    const den = join(scratch, 'foreign-den');
    await mkdir(dir, { mode: 0o700 });
    await mkdir(den, { mode: 0o700 });
    await chown(den, other.uid, other.gid);
    await chmod(scratch, 0o711);
    // Counts connections and bytes received; closes a connection that sends anything (so a client that
    // sent its request falls back at once instead of waiting); reports when its stdin ends.
    const script = `
      const net = require('node:net');
      let connections = 0;
      let bytes = 0;
      const server = net.createServer((s) => {
        connections++;
        s.on('data', (c) => { bytes += c.length; s.destroy(); });
        s.on('error', () => {});
      });
      server.listen(process.argv[1], () => console.log('listening'));
      process.stdin.resume();
      process.stdin.on('end', () => {
        console.log(JSON.stringify({ connections, bytes }));
        process.exit(0);
      });`;
    const listener = execa(process.execPath, ['-e', script, join(den, 's')], {
      uid: other.uid,
      gid: other.gid,
      cwd: '/',
      reject: false,
    });
    await new Promise<void>((resolve, reject) => {
      listener.stdout.once('data', () => resolve());
      void listener.then((r) => reject(new Error(`the listener exited: ${r.stderr}`)));
    });
    const moved = join(dir, 'run-helper.sock');
    try {
      await rename(join(den, 's'), moved);
      await chown(moved, 0, 0);
      await chmod(moved, 0o600);
      const r = await execa(process.execPath, [bin, 'run', repo, '--data', dir, '-v', '--', 'echo', 'x'], {
        reject: false,
        env: ON,
      });
      expect([r.exitCode, r.stdout]).toEqual([0, 'x']); // run in-process
      expect(r.stderr).not.toContain('handed to the run helper');
      expect(r.stderr).toContain(
        `agentfense: run helper not used: the process listening on its socket runs as uid ${other.uid}`,
      );
      expect(await waitForReapers(dir)).toBe(true);
    } finally {
      listener.stdin.end();
    }
    const report = JSON.parse((await listener).stdout.split('\n')[1] ?? '') as {
      connections: number;
      bytes: number;
    };
    expect(report.connections).toBeGreaterThan(0); // the client did reach it (control)
    expect(report.bytes).toBe(0); // and sent nothing: no argv, environment or stdin
  });

  it('another local user cannot connect: 0600 socket in a 0700 data directory', async () => {
    await chmod(scratch, 0o711); // the user can reach the data directory's parent, not into it
    const r = await attack(user);
    expect(r).toMatchObject({ connected: false, error: 'EACCES', types: [] });
  });

  it('with the modes loosened, SO_PEERCRED still refuses another uid before any request is read', async () => {
    // Control: the same request as root is served (the attack would work without the uid check).
    const served = await attack(undefined);
    expect(served.types[0]).toBe(10); // ACCEPT
    expect(served.text).toMatch(/REACHED-[1-9]\d*/); // run as the sandbox user, not root
    await chmod(scratch, 0o711);
    await chmod(data, 0o711);
    await chmod(socket, 0o666);
    try {
      const r = await attack(user);
      expect(r.connected).toBe(true); // the modes no longer stop it
      expect(r.types).toEqual([]); // closed (reset) without ACCEPT, output or status
      expect(r.text).not.toContain('REACHED');
    } finally {
      await chmod(socket, 0o600);
      await chmod(data, 0o700);
    }
    const log = await readFile(join(data, 'logs', 'control.log'), 'utf8');
    expect(log).toContain('connection from another uid refused');
  });

  it("the helper's commands run as the sandbox user, not host root", async () => {
    const child = execa(
      process.execPath,
      [bin, 'run', repo, '--data', data, '-v', '--', 'sh', '-c', 'sleep 3.377; id -u'],
      {
        env: ON,
        reject: false,
      },
    );
    // The command as the host sees it: its real, effective, saved and filesystem uids.
    let uids: string[] = [];
    for (let i = 0; i < 200 && uids.length === 0; i++) {
      const found = await execa('pgrep', ['-f', '^sleep 3.377'], { reject: false });
      const pid = found.stdout.split('\n')[0];
      if (pid) {
        const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
        uids = /^Uid:\s+(.*)$/m.exec(status)?.[1]?.split(/\s+/) ?? [];
      }
      if (uids.length === 0) await sleep(50);
    }
    const r = await child;
    expect(r.stderr).toContain('handed to the run helper');
    expect(r.exitCode).toBe(0);
    expect(Number(r.stdout.trim())).toBeGreaterThan(0);
    expect(uids).toHaveLength(4);
    expect(uids.filter((uid) => uid === '0')).toEqual([]);
  });
});
