// Another local user of the host must not reach a running sandbox's workspace, nor anything of the data
// directory (deltas, stored codebases, the database, logs, worker files). The worker mounts with
// `allow_other` (the sandbox user is not the mounter), so the mount itself lets any uid in: what keeps
// other users out is that every directory leading to it is closed to them. With the bwrap relay
// directories under /run/agentfense at 0711, a user who built the path (sandbox ids are visible to
// everyone as cgroup names) read what the rules let the sandbox read.
//
// A real throwaway host user (random name, removed afterwards) tries every path it can build while a
// sandbox runs a command and a session: the relay and the session anchors with what is behind them, every
// path in the data directory (whose parent is opened to everyone here, as /var/lib is), and /proc of the
// worker and of every sandbox process. The sandbox user must still reach its relay (positive control).
import { chmod, mkdir, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { listMounts } from '@agentfense/fuse-worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import type { Session } from '@agentfense/control';
import { DEFAULT_RUN_DIR } from '@agentfense/runtime-bwrap';
import {
  EXAMPLE_FILES,
  assertCleanAndRemove,
  makeDirs,
  waitFor,
  writeTree,
} from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';
import {
  createLocalUser,
  probeAs,
  processTargets,
  removeLocalUser,
  succeeded,
  targetsFor,
  targetsUnder,
} from '../helpers/local-user.js';
import type { HostUser, ProbeTarget } from '../helpers/local-user.js';

/** Pids whose cgroup membership names the sandbox (its commands, session shells, their children). */
async function sandboxPids(sandboxId: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cgroup = await readFile(`/proc/${entry}/cgroup`, 'utf8').catch(() => '');
    if (cgroup.includes(`/${sandboxId}\n`)) pids.push(Number(entry));
  }
  return pids;
}

/**
 * What is behind a relay or an anchor: the directory's listing, the workspace and two files the sandbox
 * may read. Not a stat of the directory itself: the run directory is 0711 (every sandbox has a uid and
 * group of its own, so no one group could pass for all), and a stat by name shows the relay exists with
 * that sandbox's group, as the cgroup names and `ps` already tell everyone.
 */
function mountTargets(dir: string): ProbeTarget[] {
  return [
    { path: dir, op: 'list' },
    { path: `${dir}/workspace`, op: 'stat' },
    { path: `${dir}/workspace`, op: 'list' },
    { path: `${dir}/workspace/src/app.py`, op: 'open' },
    { path: `${dir}/workspace/output/agent.txt`, op: 'open' },
  ];
}

describe('another local user of the host', () => {
  let dirs: TestDirs;
  let cp: ControlPlane;
  let other: HostUser | undefined;
  let id: string;
  let session: Session;
  let running: Promise<unknown>;
  const marker = `af-local-users-${String(process.pid)}`;
  /** The sandbox's own host user (leased for it alone; recorded in its directory). */
  let sandboxUser: { uid: number; gid: number } | undefined;

  beforeAll(async () => {
    other = await createLocalUser();
    dirs = await makeDirs();
    // The data directory's parent is open to everyone, as /var/lib or a home directory's .local may be.
    await chmod(dirs.root, 0o755);
    // The linked project sits in a home directory closed to others (0700), its own files world-readable
    // inside, as usual: the other user cannot read it directly.
    const home = join(dirs.root, 'home');
    await mkdir(home, { mode: 0o700 });
    const project = join(home, 'project');
    await writeTree(project, EXAMPLE_FILES);
    cp = await ControlPlane.open({ dataDir: dirs.dataDir });
    // A stored codebase too: its files live in the data directory.
    const stored = await cp.createCodebase({ name: 'local-users' });
    for (const [path, content] of Object.entries(EXAMPLE_FILES))
      await cp.uploadFile(stored.id, path, content);
    const { id: codebaseId } = await cp.linkCodebase({ path: project });
    ({ id } = await cp.createSandbox({ codebaseId, preset: 'agent-safe' }));
    await cp.startSandbox(id);
    const [uid, gid] = (await readFile(cp.layout.sandbox(id).hostUser, 'utf8')).trim().split(':');
    sandboxUser = { uid: Number(uid), gid: Number(gid) };
    // A file in the delta, a session (its anchor) and a running command (its processes).
    const wrote = await cp.run(id, 'echo agent-wrote > /workspace/output/agent.txt');
    expect(wrote.exitCode, wrote.stderr).toBe(0);
    session = await cp.createSession(id);
    expect((await session.run('cd /workspace/src && cat app.py')).stdout).toBe(EXAMPLE_FILES['src/app.py']);
    running = cp.run(id, `sleep 120 # ${marker}`, { timeoutMs: 110_000 }).catch(() => undefined);
    await waitFor('the running command on the host', async () => {
      for (const pid of await sandboxPids(id)) {
        const cmdline = await readFile(`/proc/${String(pid)}/cmdline`, 'utf8').catch(() => '');
        if (cmdline.includes(marker)) return true;
      }
      return undefined;
    });
  }, 60_000);

  afterAll(async () => {
    try {
      for (const sb of (await cp?.listSandboxes())?.items ?? []) await cp.destroySandbox(sb.id);
      await running;
      await cp?.close();
      if (dirs !== undefined) await assertCleanAndRemove(dirs);
    } finally {
      await removeLocalUser(other);
    }
  }, 60_000);

  const relays = async (): Promise<string[]> => [
    join(DEFAULT_RUN_DIR, id),
    ...(await readdir(DEFAULT_RUN_DIR))
      .filter((name) => name.startsWith(`${id}.s-`))
      .map((name) => join(DEFAULT_RUN_DIR, name)),
  ];

  it('the probe works: the other user reads a world-readable file', async () => {
    const [result] = await probeAs(other as HostUser, [{ path: '/etc/passwd', op: 'open' }]);
    expect(result?.outcome).toBe('ok');
  });

  /** The sandbox user reaches the mount behind the relay (and behind the anchor after a restart). */
  async function expectSandboxUserReaches(dirs: readonly string[]): Promise<void> {
    const results = await probeAs(
      sandboxUser as { uid: number; gid: number },
      dirs.flatMap((dir) => [
        { path: `${dir}/workspace`, op: 'stat' as const },
        { path: `${dir}/workspace/src/app.py`, op: 'open' as const },
      ]),
    );
    expect(results.filter((r) => r.outcome !== 'ok')).toEqual([]);
  }

  async function expectOtherUserRefused(dirs: readonly string[]): Promise<void> {
    const targets: ProbeTarget[] = [{ path: DEFAULT_RUN_DIR, op: 'list' }];
    for (const dir of dirs) targets.push(...mountTargets(dir));
    const results = await probeAs(other as HostUser, targets);
    expect(results).toHaveLength(targets.length);
    expect(succeeded(results)).toEqual([]);
  }

  it('cannot reach the workspace through the relay or a session anchor, while the sandbox user can', async () => {
    expect(sandboxUser).toBeDefined();
    const [relay, ...anchors] = await relays();
    expect(anchors.length, "the session's anchor (and the exec launcher's)").toBeGreaterThanOrEqual(1);
    await expectSandboxUserReaches([relay as string]);
    await expectOtherUserRefused([relay as string, ...anchors]);
  });

  it('still cannot after a worker restart, when the new mount shows under the session anchor too', async () => {
    process.kill(cp.workerPid(id) as number, 'SIGKILL');
    await waitFor(
      'the worker restart',
      async () => ((await cp.getSandbox(id)).restartCount === 1 ? true : undefined),
      60_000,
    );
    // The session follows the new mount (its anchor), so the anchor now leads to the workspace as well.
    expect((await session.run('cat app.py')).stdout).toBe(EXAMPLE_FILES['src/app.py']);
    const found = await relays();
    expect(found.length).toBeGreaterThanOrEqual(2);
    await expectSandboxUserReaches(found);
    await expectOtherUserRefused(found);
  });

  it('cannot read anything in the data directory: deltas, codebases, database, logs, mounts', async () => {
    const data = dirs.dataDir;
    expect((await cp.getSandbox(id)).state).toBe('RUNNING');
    const sandboxDir = join(data, 'sandboxes', id);
    const targets: ProbeTarget[] = [
      { path: data, op: 'list' },
      ...(await targetsUnder(data)),
      // behind the mounts the walk does not enter: the FUSE mount and its parent
      ...mountTargets(join(sandboxDir, 'mnt')),
    ];
    // the walk saw what matters, so a test that probes nothing cannot pass
    const walked = targets.map((t) => t.path.slice(data.length));
    expect(walked).toContain('/agentfense.db');
    expect(walked).toContain('/logs/control.log');
    expect(walked.some((p) => p.startsWith(`/sandboxes/${id}/delta/`) && p.endsWith('agent.txt'))).toBe(true);
    expect(walked.some((p) => p.startsWith('/codebases/') && p.endsWith('/files/src/app.py'))).toBe(true);
    expect(walked).toContain(`/sandboxes/${id}/worker.log`);
    const results = await probeAs(other as HostUser, targets);
    expect(results).toHaveLength(targets.length);
    expect(succeeded(results)).toEqual([]);
  });

  it("cannot reach the workspace through /proc of the worker or of the sandbox's processes", async () => {
    const worker = cp.workerPid(id);
    expect(worker).toBeGreaterThan(0);
    const pids = await sandboxPids(id);
    // the running command and the session's shell at least
    expect(pids.length).toBeGreaterThanOrEqual(2);
    const targets = [worker as number, ...pids].flatMap(processTargets);
    // The same paths as root: they exist (so a refusal above is the defence, not a wrong path).
    const asRoot = await Promise.all(
      pids.map((pid) => targetsFor(`/proc/${String(pid)}/root/workspace/src/app.py`).catch(() => [])),
    );
    expect(asRoot.flat().length).toBeGreaterThan(0);
    const results = await probeAs(other as HostUser, targets);
    expect(succeeded(results)).toEqual([]);
  });
});

// The one-shot CLI opens the data directory on a path of its own (the worker spawned before the CLI
// loads, a lighter open for `run`): the same paths must be closed while its command runs.
describe('another local user of the host, during a one-shot `agentfense run`', () => {
  const bin = fileURLToPath(new URL('../../packages/control/bin/agentfense.js', import.meta.url));
  let scratch: string;
  let other: HostUser | undefined;

  beforeAll(async () => {
    other = await createLocalUser();
    scratch = await mkdtemp(join(tmpdir(), 'af-local-users-run-'));
    await chmod(scratch, 0o755);
    await mkdir(join(scratch, 'home'), { mode: 0o700 });
    await writeTree(join(scratch, 'home', 'project'), EXAMPLE_FILES);
  });
  afterAll(async () => {
    try {
      const left = (await listMounts()).filter((m) => m.mountpoint.startsWith(scratch));
      await rm(scratch, { recursive: true, force: true });
      expect(left).toEqual([]);
    } finally {
      await removeLocalUser(other);
    }
  });

  it('cannot reach the relay, the data directory or the processes of a running `run`', async () => {
    const data = join(scratch, 'data');
    const duration = `600.${String(process.pid)}`; // sleep's argument marks the command on the host
    const child = execa(
      process.execPath,
      [bin, 'run', join(scratch, 'home', 'project'), '--data', data, '-v', '--', 'sleep', duration],
      { reject: false },
    );
    try {
      let said = '';
      child.stderr?.on('data', (chunk: Buffer) => (said += chunk.toString()));
      const id = await waitFor('the sandbox id', () => /created (sb_[0-9a-f-]+)/.exec(said)?.[1], 60_000);
      const pids = await waitFor(
        'the command in its sandbox',
        async () => {
          const found = await sandboxPids(id);
          for (const pid of found) {
            const cmdline = await readFile(`/proc/${String(pid)}/cmdline`, 'utf8').catch(() => '');
            if (cmdline.includes(duration)) return found;
          }
          return undefined;
        },
        60_000,
      );
      const relay = join(DEFAULT_RUN_DIR, id);
      // root reaches the workspace through the relay: a refusal below is the defence, not a wrong path
      expect(await readFile(join(relay, 'workspace/src/app.py'), 'utf8')).toBe(EXAMPLE_FILES['src/app.py']);
      const targets: ProbeTarget[] = [
        ...mountTargets(relay),
        { path: data, op: 'list' },
        ...(await targetsUnder(data)),
        ...pids.flatMap(processTargets),
      ];
      expect(targets.map((t) => t.path)).toContain(join(data, 'agentfense.db'));
      const results = await probeAs(other as HostUser, targets);
      expect(results).toHaveLength(targets.length);
      expect(succeeded(results)).toEqual([]);
    } finally {
      child.kill('SIGTERM');
      await child;
    }
    expect(child.exitCode, 'run stops its sandbox on SIGTERM').toBe(143);
  });
});
