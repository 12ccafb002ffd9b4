// Real-mount fixtures for the FUSE worker: build a codebase tree, spawn a worker, mount it with rules, and
// run shell commands on the mount two ways:
//   - `sandbox(cmd)`: inside bwrap as uid 1000 with every capability dropped, the mount at /workspace —
//     what the product does (the kernel enforces our mode bits for this user);
//   - `host(cmd)`: as host root in the mountpoint (CAP_DAC_OVERRIDE bypasses mode bits, so this exercises
//     the worker's own checks at lookup/read/write/setattr, the defence behind the mode bits).
// The worker is a separate process, so this test process may touch the mount (async calls only anyway).
// `useMountHygiene()` registers hooks that stop every fixture and fail the file if a FUSE mount or a worker
// process of ours is left behind.
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, expect } from 'vitest';
import { clearFuseMount, listMounts, spawnWorker } from '@agentfense/fuse-worker';
import type { WorkerHandle } from '@agentfense/fuse-worker';
import type { AuditEvent, PermissionRule } from '@agentfense/protocol';
import { buildBwrapArgs, type SystemMount } from '@agentfense/runtime-bwrap';

/**
 * Where every fixture of this test process lives (mountpoints included), so its leftovers are easy to find
 * and other test runs on the same machine (their own pid) are never mistaken for ours.
 */
export const FIXTURE_PREFIX = join(tmpdir(), `af-worker-test-${process.pid}-`);

/** A codebase entry: file content, or a file with a mode, a directory, a symlink. */
export type TreeEntry =
  | string
  | Buffer
  | { readonly content: string | Buffer; readonly mode: number }
  | { readonly dir: true; readonly mode?: number }
  | { readonly symlink: string };

/** Codebase-relative path ('a/b.txt') -> entry. Parent directories are created as needed. */
export type Tree = Readonly<Record<string, TreeEntry>>;

export interface RunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface FixtureOptions {
  readonly tree?: Tree;
  readonly rules: readonly PermissionRule[];
  readonly auditAllowed?: boolean;
  readonly cacheTtlSeconds?: number;
  /** MountParams.diskQuotaBytes: the delta's disk quota. */
  readonly diskQuotaBytes?: number;
  /** Let other host uids use the mount (tests acting as an unprivileged user). */
  readonly allowOther?: boolean;
  /** MountParams.warmupEntries: the entry warm-up's budget (0: off). */
  readonly warmupEntries?: number;
  /** Reuse these host directories (a second worker on the same codebase and delta). */
  readonly lowerDir?: string;
  readonly deltaDir?: string;
}

export interface MountedFixture {
  /** The fixture's own temp directory. */
  readonly base: string;
  readonly lower: string;
  readonly delta: string;
  readonly mnt: string;
  readonly worker: WorkerHandle;
  /** Every audit event received so far, oldest first. */
  readonly audit: AuditEvent[];
  /** Runs `sh -c cmd` in bwrap, uid 1000 without capabilities, cwd /workspace (= the mount). */
  readonly sandbox: (cmd: string, options?: { stdin?: string; timeoutMs?: number }) => Promise<RunResult>;
  /** Runs `sh -c cmd` as host root with cwd = the mountpoint. */
  readonly host: (cmd: string, options?: { stdin?: string }) => Promise<RunResult>;
  /** Waits until an audit event matching `pred` arrived (events are batched every 50 ms). */
  waitAudit(pred: (e: AuditEvent) => boolean, timeoutMs?: number): Promise<AuditEvent>;
  /** Unmounts and waits for the worker to exit (idempotent). */
  stop(): Promise<void>;
}

const live = new Set<MountedFixture>();
const bases: string[] = [];

/** The agent-safe-like rule set most tests use. */
export const AGENT_SAFE: readonly PermissionRule[] = [
  { pattern: '**', permission: 'read' },
  { pattern: '/output/**', permission: 'write', priority: 10 },
  { pattern: '/tmp/**', permission: 'write', priority: 10 },
  { pattern: '**/.env*', permission: 'none', priority: 100 },
  { pattern: '**/secrets/**', permission: 'none', priority: 100 },
  { pattern: '*.key', permission: 'none', priority: 100 },
  { pattern: '/docs/**', permission: 'view', priority: 50 },
];

/** Writes `tree` below `root`. */
export async function writeTree(root: string, tree: Tree): Promise<void> {
  for (const [rel, entry] of Object.entries(tree)) {
    const path = join(root, rel);
    await mkdir(dirname(path), { recursive: true });
    if (typeof entry === 'string' || Buffer.isBuffer(entry)) {
      await writeFile(path, entry);
    } else if ('dir' in entry) {
      await mkdir(path, { recursive: true });
      if (entry.mode !== undefined) await chmod(path, entry.mode);
    } else if ('symlink' in entry) {
      await symlink(entry.symlink, path);
    } else {
      await writeFile(path, entry.content);
      await chmod(path, entry.mode);
    }
  }
}

/**
 * The host system inside the test sandboxes: Debian's merged /usr, as resolveSystemMounts() finds it on
 * this machine, plus /etc/alternatives (where Debian's `awk`, `editor`... point).
 */
const SYSTEM_MOUNTS: readonly SystemMount[] = [
  { kind: 'ro-bind', source: '/usr', dest: '/usr' },
  { kind: 'symlink', target: 'usr/bin', dest: '/bin' },
  { kind: 'symlink', target: 'usr/sbin', dest: '/sbin' },
  { kind: 'symlink', target: 'usr/lib', dest: '/lib' },
  { kind: 'symlink', target: 'usr/lib64', dest: '/lib64' },
  { kind: 'ro-bind', source: '/etc/alternatives', dest: '/etc/alternatives', optional: true },
];

/**
 * The bwrap argv that runs `sh -c cmd` as the product does (runtime-bwrap's own buildBwrapArgs: uid 1000,
 * no capabilities, private namespaces, `mnt` at /workspace), so these tests see what a sandbox sees.
 */
export function bwrapArgv(mnt: string, cmd: string): string[] {
  return buildBwrapArgs({ workspaceHostPath: mnt, systemMounts: SYSTEM_MOUNTS, command: ['sh', '-c', cmd] });
}

/** Runs a program with an argv array; never rejects (the exit code is in the result). */
export function runArgv(
  file: string,
  args: readonly string[],
  options: { cwd?: string; stdin?: string; timeoutMs?: number } = {},
): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = execFile(
      file,
      args,
      {
        cwd: options.cwd,
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
        timeout: options.timeoutMs ?? 50_000,
        env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/tmp', LANG: 'C.UTF-8' },
      },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 128;
        resolve({ code, stdout, stderr });
      },
    );
    if (options.stdin !== undefined) child.stdin?.end(options.stdin);
    else child.stdin?.end();
  });
}

/** Creates the codebase, spawns a worker and mounts it. */
export async function mountFixture(options: FixtureOptions): Promise<MountedFixture> {
  const base = await mkdtemp(FIXTURE_PREFIX);
  bases.push(base);
  const lower = options.lowerDir ?? join(base, 'lower');
  const delta = options.deltaDir ?? join(base, 'delta');
  const mnt = join(base, 'mnt');
  await mkdir(lower, { recursive: true });
  await mkdir(mnt);
  if (options.tree !== undefined) await writeTree(lower, options.tree);
  const worker = await spawnWorker({ logFile: join(base, 'worker.log'), name: 'test', logLevel: 'debug' });
  const audit: AuditEvent[] = [];
  const waiters = new Set<() => void>();
  worker.client.onEvent('audit', (events) => {
    audit.push(...events);
    for (const w of waiters) w();
  });
  let stopped: Promise<void> | undefined;
  const fixture: MountedFixture = {
    base,
    lower,
    delta,
    mnt,
    worker,
    audit,
    sandbox: (cmd, o = {}) => runArgv('bwrap', bwrapArgv(mnt, cmd), o),
    host: (cmd, o = {}) => runArgv('sh', ['-c', cmd], { cwd: mnt, ...o }),
    waitAudit: (pred, timeoutMs = 3000) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          const hit = audit.find(pred);
          if (hit === undefined) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(hit);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no matching audit event; got ${JSON.stringify(audit)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
    stop: () => {
      stopped ??= (async () => {
        live.delete(fixture);
        await worker.stop({ graceMs: 5000 });
        await clearFuseMount(mnt);
      })();
      return stopped;
    },
  };
  live.add(fixture);
  try {
    await worker.mount({
      lowerDir: lower,
      deltaDir: delta,
      mountpoint: mnt,
      rules: options.rules,
      ...(options.auditAllowed === undefined ? {} : { auditAllowed: options.auditAllowed }),
      ...(options.cacheTtlSeconds === undefined ? {} : { cacheTtlSeconds: options.cacheTtlSeconds }),
      ...(options.diskQuotaBytes === undefined ? {} : { diskQuotaBytes: options.diskQuotaBytes }),
      ...(options.allowOther === undefined ? {} : { allowOther: options.allowOther }),
      ...(options.warmupEntries === undefined ? {} : { warmupEntries: options.warmupEntries }),
    });
  } catch (err) {
    await fixture.stop();
    throw err;
  }
  return fixture;
}

/** FUSE mounts below our fixture directories. */
export async function leftoverMounts(): Promise<string[]> {
  return (await listMounts())
    .filter((m) => m.fsType.startsWith('fuse') && m.mountpoint.startsWith(FIXTURE_PREFIX))
    .map((m) => m.mountpoint);
}

/**
 * Stops every fixture after each test and checks that no mount and no worker of ours is left; removes the
 * fixture directories after the file. A leftover fails the test that left it.
 */
export function useMountHygiene(): void {
  afterEach(async () => {
    const workers = [...live].map((f) => f.worker);
    await Promise.all([...live].map((f) => f.stop()));
    expect(await leftoverMounts()).toEqual([]);
    expect(workers.filter((w) => w.alive).map((w) => w.pid)).toEqual([]);
  });
  afterAll(async () => {
    expect(await leftoverMounts()).toEqual([]);
    for (const base of bases.splice(0)) {
      await rm(base, { recursive: true, force: true }).catch(() => undefined);
    }
  });
}

/** Runs `fn` with one environment variable set (a worker mounted inside it reads it), then restores it. */
export async function withEnv<T>(name: string, value: string, fn: () => Promise<T>): Promise<T> {
  const previous = process.env[name];
  process.env[name] = value;
  try {
    return await fn();
  } finally {
    if (previous === undefined) delete process.env[name];
    else process.env[name] = previous;
  }
}

/** WRITEs the binding answered in C so far (the worker's `write-native` counter). */
export async function nativeWriteCount(f: MountedFixture): Promise<number> {
  return (await f.worker.client.request('stats', {})).ops['write-native']?.count ?? 0;
}

/** READs the binding answered in C so far (the worker's `read-native` counter). */
export async function nativeReadCount(f: MountedFixture): Promise<number> {
  return (await f.worker.client.request('stats', {})).ops['read-native']?.count ?? 0;
}
