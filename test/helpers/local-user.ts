// Another local user of the host, for the local-users attack tests: a throwaway system user with a random
// name (a parallel run of the same test in another checkout gets its own), removed in teardown, and a
// probe that tries paths as that user (a real process with its uid and gid, no supplementary groups).
import { randomBytes } from 'node:crypto';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { listMounts } from '@agentfense/fuse-worker';

export interface HostUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

/** What the probe tries: stat(2), readdir(3), open(2) for reading, readlink(2), connect(2) to a socket. */
export type ProbeOp = 'stat' | 'list' | 'open' | 'readlink' | 'connect';
export interface ProbeTarget {
  readonly path: string;
  readonly op: ProbeOp;
}
/** `outcome` is 'ok' when the operation succeeded, else the error code (EACCES, ENOENT, ...). */
export interface ProbeResult extends ProbeTarget {
  readonly outcome: string;
}

/** Runs a command, retrying while another useradd/userdel holds the passwd lock (exit 10 / "lock"). */
async function runShadowTool(file: string, args: readonly string[]): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const r = await execa(file, args, { reject: false });
    if (r.exitCode === 0) return;
    if (attempt < 20 && /lock/i.test(r.stderr)) {
      await sleep(100);
      continue;
    }
    throw new Error(`${file} ${args.join(' ')} failed (${String(r.exitCode)}): ${r.stderr}`);
  }
}

/** Creates a throwaway local user (own group, no home, no login shell). Remove it with removeLocalUser. */
export async function createLocalUser(): Promise<HostUser> {
  const name = `aflu${randomBytes(5).toString('hex')}`;
  await runShadowTool('useradd', [
    '--system',
    '--user-group',
    '--no-create-home',
    '--home-dir',
    '/nonexistent',
    '--shell',
    '/usr/sbin/nologin',
    name,
  ]);
  const id = async (flag: string): Promise<number> => Number((await execa('id', [flag, name])).stdout);
  return { name, uid: await id('-u'), gid: await id('-g') };
}

/** Removes the user and its group (userdel removes a user group it created; groupdel is the fallback). */
export async function removeLocalUser(user: HostUser | undefined): Promise<void> {
  if (user === undefined) return;
  await runShadowTool('userdel', [user.name]);
  const group = await execa('getent', ['group', user.name], { reject: false });
  if (group.exitCode === 0) await runShadowTool('groupdel', [user.name]);
}

// The probe: a constant script (targets on stdin as JSON), run by node as the given user. `open` counts
// as access when open(2) succeeds: for /proc/PID/mem or a file of the mount, that alone is the hole.
const PROBE_SCRIPT = `
const fs = require('fs'), net = require('net');
let input = '';
process.stdin.on('data', (c) => { input += c; });
process.stdin.on('end', async () => {
  const out = [];
  for (const t of JSON.parse(input)) {
    let outcome = 'ok';
    try {
      if (t.op === 'stat') fs.statSync(t.path);
      else if (t.op === 'list') fs.readdirSync(t.path);
      else if (t.op === 'open') fs.closeSync(fs.openSync(t.path, 'r'));
      else if (t.op === 'readlink') fs.readlinkSync(t.path);
      else if (t.op === 'connect')
        await new Promise((resolve, reject) => {
          const s = net.connect(t.path, () => { s.destroy(); resolve(); });
          s.on('error', reject);
        });
      else outcome = 'bad-op';
    } catch (e) {
      outcome = e.code || String(e);
    }
    out.push({ path: t.path, op: t.op, outcome });
  }
  process.stdout.write(JSON.stringify(out));
});
`;

/** Tries every target as `user` (uid and gid set, supplementary groups cleared by libuv). */
export async function probeAs(
  user: { readonly uid: number; readonly gid: number },
  targets: readonly ProbeTarget[],
): Promise<ProbeResult[]> {
  const r = await execa(process.execPath, ['-e', PROBE_SCRIPT], {
    uid: user.uid,
    gid: user.gid,
    cwd: '/',
    env: { PATH: '/usr/bin:/bin' },
    extendEnv: false,
    input: JSON.stringify(targets),
  });
  return JSON.parse(r.stdout) as ProbeResult[];
}

/** What a probe should try on one existing path, by its type (seen by root, without following symlinks). */
export async function targetsFor(path: string): Promise<ProbeTarget[]> {
  const info = await lstat(path);
  if (info.isDirectory())
    return [
      { path, op: 'stat' },
      { path, op: 'list' },
    ];
  if (info.isSocket())
    return [
      { path, op: 'stat' },
      { path, op: 'connect' },
    ];
  if (info.isSymbolicLink())
    return [
      { path, op: 'stat' },
      { path, op: 'readlink' },
    ];
  return [
    { path, op: 'stat' },
    { path, op: 'open' },
  ];
}

/**
 * Every path below `root` (walked as root, never following a symlink and never descending into a mount
 * point below it: the caller names what it wants probed behind a mount), with what to try on each.
 */
export async function targetsUnder(root: string): Promise<ProbeTarget[]> {
  const mounts = new Set((await listMounts()).map((m) => m.mountpoint));
  const found: ProbeTarget[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      const path = join(dir, name);
      const targets = await targetsFor(path).catch(() => [] as ProbeTarget[]);
      found.push(...targets);
      if (targets.some((t) => t.op === 'list') && !mounts.has(path)) await walk(path);
    }
  };
  await walk(root);
  return found;
}

/** What the other user tries on a process: its environment, memory, descriptors, cwd and root. */
export function processTargets(pid: number): ProbeTarget[] {
  const p = `/proc/${String(pid)}`;
  return [
    { path: `${p}/environ`, op: 'open' },
    { path: `${p}/mem`, op: 'open' },
    { path: `${p}/fd`, op: 'list' },
    { path: `${p}/cwd`, op: 'readlink' },
    { path: `${p}/cwd`, op: 'list' },
    { path: `${p}/root`, op: 'readlink' },
    { path: `${p}/root/workspace/src/app.py`, op: 'open' },
    { path: `${p}/root/workspace/output/agent.txt`, op: 'open' },
  ];
}

/** The probes that got through ("op path"), which must be none. */
export const succeeded = (results: readonly ProbeResult[]): string[] =>
  results.filter((r) => r.outcome === 'ok').map((r) => `${r.op} ${r.path}`);
