// Starting and stopping Debian's `dockerd` for a host that has no running engine (tests, benchmarks, and
// `agentfense setup docker --start-engine`). The daemon is private to AgentFense: its own socket, data and
// exec roots and config file under one state directory, and flags that leave the host's network alone.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdir, open, readFile, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidArgumentError, UnavailableError, findExecutable } from '@agentfense/protocol';
import { createDockerCli, runDocker } from './cli.js';
import { unmountBelow } from './mounts.js';

/** Default state directory of an AgentFense-started engine. */
export const DEFAULT_DOCKERD_STATE_DIR = '/var/lib/agentfense/dockerd';

/** Where dockerd is looked for besides PATH (Debian's docker.io installs /usr/sbin/dockerd). */
const DOCKERD_DIRS = ['/usr/sbin', '/usr/bin', '/sbin', '/usr/local/sbin', '/usr/local/bin'];

/** How long a starting engine gets to answer (it is up in a few seconds; a loaded CI host is slower). */
const DEFAULT_READY_TIMEOUT_MS = 60_000;
/** How long a stopping engine gets after SIGTERM (it stops containers and containerd) before SIGKILL. */
const STOP_TIMEOUT_MS = 30_000;
/** Interval of the readiness probe: dockerd has no readiness signal but its socket answering. */
const PROBE_INTERVAL_MS = 200;
/** unix socket paths longer than this do not fit in sockaddr_un (108 bytes with the NUL). */
const MAX_SOCKET_PATH = 100;

/**
 * dockerd's flags besides the paths, and why:
 * - `--bridge=none`, `--iptables=false`, `--ip6tables=false`, `--ip-masq=false`: no docker0 bridge, no
 *   firewall or NAT rules: the engine changes nothing in the host's network configuration. Containers get
 *   `--network none` (or `host` when a sandbox asks for network).
 * - `--ip-forward=false`: otherwise dockerd switches on the host's net.ipv4.ip_forward.
 * - `--userland-proxy=false`: no docker-proxy processes (nothing is published anyway).
 * - `--config-file <state>/daemon.json` (empty): the host's /etc/docker/daemon.json cannot change these.
 */
export const DOCKERD_FLAGS: readonly string[] = [
  '--bridge=none',
  '--iptables=false',
  '--ip6tables=false',
  '--ip-masq=false',
  '--ip-forward=false',
  '--userland-proxy=false',
];

/** Answer of probeEngine. */
export type EngineProbe =
  | { readonly ok: true; readonly version: string; readonly dockerHost: string }
  | { readonly ok: false; readonly reason: string; readonly dockerHost: string };

/** Does an engine answer at `dockerHost` (default: DOCKER_HOST, else docker's default socket)? Never throws. */
export async function probeEngine(
  options: { dockerHost?: string; dockerPath?: string; timeoutMs?: number } = {},
): Promise<EngineProbe> {
  let host = options.dockerHost ?? process.env['DOCKER_HOST'] ?? 'unix:///var/run/docker.sock';
  try {
    const cli = await createDockerCli({
      ...(options.dockerPath === undefined ? {} : { dockerPath: options.dockerPath }),
      ...(options.dockerHost === undefined ? {} : { dockerHost: options.dockerHost }),
    });
    host = cli.host;
    const result = await runDocker(cli, ['version', '--format', '{{.Server.Version}}'], {
      timeoutMs: options.timeoutMs ?? 10_000,
    });
    const version = result.stdout.trim();
    if (result.failed || version === '') {
      return { ok: false, reason: result.stderr.trim() || 'no server version', dockerHost: host };
    }
    return { ok: true, version, dockerHost: host };
  } catch (err) {
    return { ok: false, reason: (err as Error).message, dockerHost: host };
  }
}

export interface StartDockerdOptions {
  /** Holds `data/`, `exec/`, `docker.sock`, `dockerd.pid`, `dockerd.log`, `daemon.json`. */
  readonly stateDir?: string;
  /** The dockerd executable; default: found on PATH or in /usr/sbin. */
  readonly dockerdPath?: string;
  /** The docker CLI used for the readiness probe. */
  readonly dockerPath?: string;
  readonly readyTimeoutMs?: number;
}

/** An engine this process started. */
export interface StartedDockerd {
  /** `unix://<state>/docker.sock`: pass as DOCKER_HOST / `dockerHost`. */
  readonly dockerHost: string;
  readonly pid: number;
  readonly logFile: string;
  /** SIGTERM, wait (SIGKILL after STOP_TIMEOUT_MS). Idempotent. */
  stop(): Promise<void>;
}

/** The file layout under a state directory. */
export function dockerdPaths(stateDir: string): {
  data: string;
  exec: string;
  socket: string;
  pidFile: string;
  logFile: string;
  configFile: string;
} {
  return {
    data: posix.join(stateDir, 'data'),
    exec: posix.join(stateDir, 'exec'),
    socket: posix.join(stateDir, 'docker.sock'),
    pidFile: posix.join(stateDir, 'dockerd.pid'),
    logFile: posix.join(stateDir, 'dockerd.log'),
    configFile: posix.join(stateDir, 'daemon.json'),
  };
}

/** Finds an executable dockerd. */
async function resolveDockerd(configured: string | undefined): Promise<string> {
  const found = await findExecutable({ name: 'dockerd', configured, fallbackDirs: DOCKERD_DIRS });
  if (found !== null) return found;
  throw new UnavailableError(
    `dockerd is not installed (no executable ${configured ?? 'dockerd'}): install it with \`apt-get install docker.io\``,
  );
}

/**
 * Starts dockerd in the background (it outlives this process unless stopped) and resolves once its socket
 * answers. Fails with the log's tail if it exits or does not answer in time.
 */
export async function startDockerd(options: StartDockerdOptions = {}): Promise<StartedDockerd> {
  if (process.getuid?.() !== 0) throw new UnavailableError('starting dockerd needs root');
  const stateDir = options.stateDir ?? DEFAULT_DOCKERD_STATE_DIR;
  if (!posix.isAbsolute(stateDir))
    throw new InvalidArgumentError('the dockerd state directory must be absolute');
  const paths = dockerdPaths(stateDir);
  if (paths.socket.length > MAX_SOCKET_PATH) {
    throw new InvalidArgumentError(`the dockerd state directory is too long for a socket path: ${stateDir}`);
  }
  const dockerd = await resolveDockerd(options.dockerdPath);
  await mkdir(paths.data, { recursive: true, mode: 0o700 });
  await mkdir(paths.exec, { recursive: true, mode: 0o700 });
  await writeFile(paths.configFile, '{}\n');
  const log = await open(paths.logFile, 'a');
  const dockerHost = `unix://${paths.socket}`;
  let child: ChildProcess;
  try {
    // node's spawn, not execa: a daemon that outlives us must write its log through its own fd, never
    // through a pipe to this process (a pipe breaks when we exit, and dockerd dies of SIGPIPE).
    child = spawn(
      dockerd,
      [
        '--data-root',
        paths.data,
        '--exec-root',
        paths.exec,
        '--pidfile',
        paths.pidFile,
        '--host',
        dockerHost,
        '--config-file',
        paths.configFile,
        ...DOCKERD_FLAGS,
      ],
      {
        detached: true,
        stdio: ['ignore', log.fd, log.fd],
        // dockerd finds containerd, runc and docker-init on PATH; nothing else of ours is passed.
        env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' },
      },
    );
  } finally {
    await log.close();
  }
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      resolve();
    });
  });
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
  child.unref();
  const pid = child.pid;
  if (pid === undefined) {
    throw new UnavailableError(`could not start dockerd: ${(await spawnError).message}`);
  }

  const stop = once(async () => {
    // Hold the event loop open until dockerd is gone: the child is unref'd, and a caller awaiting this
    // (vitest's teardown) would otherwise let node exit half-way, leaving the cleanup below undone.
    child.ref();
    if (!exited) process.kill(pid, 'SIGTERM');
    const gone = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), STOP_TIMEOUT_MS);
      void exit.then(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    if (!gone) {
      process.kill(pid, 'SIGKILL');
      await exit;
    }
    // dockerd leaves its netns bind (exec/netns/default) mounted: clear it so runs do not stack mounts.
    await unmountBelow(stateDir);
  });

  const deadline = Date.now() + (options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS);
  for (;;) {
    if (exited) {
      throw new UnavailableError(`dockerd exited at start: ${await logTail(paths.logFile)}`);
    }
    const probe = await probeEngine({
      dockerHost,
      timeoutMs: 5_000,
      ...(options.dockerPath === undefined ? {} : { dockerPath: options.dockerPath }),
    });
    if (probe.ok) break;
    if (Date.now() > deadline) {
      await stop();
      throw new UnavailableError(
        `dockerd did not answer within ${String(options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS)} ms: ${await logTail(paths.logFile)}`,
      );
    }
    await sleep(PROBE_INTERVAL_MS);
  }
  return { dockerHost, pid, logFile: paths.logFile, stop };
}

/**
 * Stops an engine started earlier (by another process) from its pid file: SIGTERM, then SIGKILL after
 * STOP_TIMEOUT_MS. Resolves false if none was running.
 */
export async function stopDockerd(options: { stateDir?: string } = {}): Promise<boolean> {
  const { pidFile } = dockerdPaths(options.stateDir ?? DEFAULT_DOCKERD_STATE_DIR);
  const text = await readFile(pidFile, 'utf8').catch(() => '');
  const pid = Number(text.trim());
  if (!Number.isSafeInteger(pid) || pid <= 0 || !alive(pid)) return false;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (!cmdline.includes(pidFile)) return false; // a recycled pid, not our dockerd
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (alive(pid) && Date.now() < deadline) await sleep(100);
  if (alive(pid)) process.kill(pid, 'SIGKILL');
  while (alive(pid)) await sleep(50);
  await unmountBelow(options.stateDir ?? DEFAULT_DOCKERD_STATE_DIR);
  return true;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false; // ESRCH: gone
  }
}

async function logTail(logFile: string): Promise<string> {
  const text = await readFile(logFile, 'utf8').catch(() => '');
  return text.split('\n').filter(Boolean).slice(-5).join('\n') || `(empty log ${logFile})`;
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => (done ??= fn());
}
