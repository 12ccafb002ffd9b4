// A Docker Swarm of several dockerd instances on this host, each in a network namespace of its own on
// one bridge, made and torn down by a test. No iptables, no NAT: the nodes reach each other over the
// bridge's private subnet only. Each dockerd also gets its own UTS namespace, so its Swarm node has its
// own hostname as on a real cluster.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, readlink, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { DEFAULT_IMAGE, DOCKERD_FLAGS, ensureBaseImage } from '@agentfense/runtime-docker';

export interface SwarmNodeProcess {
  readonly hostname: string;
  readonly address: string;
  readonly netns: string;
  /** `unix://…` of this node's own engine. */
  readonly dockerHost: string;
  readonly pid: number;
}

export interface SwarmCluster {
  readonly nodes: readonly SwarmNodeProcess[];
  /** The manager's engine (the first node). */
  readonly manager: SwarmNodeProcess;
  readonly image: string;
  /** This host's address on the nodes' bridge (the API tier's, reaching each node's agent). */
  readonly hostAddress: string;
  /** The cluster's directory: what is made under it is unmounted and removed by `destroy`. */
  readonly stateDir: string;
  /** SIGKILL a node's dockerd (its containerd and containers stay until `destroy`). */
  kill(node: SwarmNodeProcess): void;
  /**
   * SIGKILL every process in a node's network namespace (dockerd, containerd and the shims, and what a
   * test started there: a node agent and its workers) and its containers; as a machine that loses power.
   */
  killNode(node: SwarmNodeProcess): Promise<void>;
  /** Everything made: processes in the namespaces, mounts, namespaces, bridge, directories. Idempotent. */
  destroy(): Promise<void>;
}

export interface SwarmClusterOptions {
  readonly nodes: number;
  /** A node label (`key=true`) set on every node, as an operator marks nodes with a node agent. */
  readonly nodeLabel: string;
  /** The managers' dispatcher heartbeat (`docker swarm init --dispatcher-heartbeat`); Swarm's default is 5s. */
  readonly heartbeat: string;
  /** Progress lines. */
  readonly log?: (line: string) => void;
}

/** What this host lacks for the test, or undefined when it has everything. */
export async function swarmPrerequisiteMissing(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces, dockerd)';
  for (const tool of ['dockerd', 'docker', 'ip', 'nsenter', 'unshare']) {
    const found = await execa('sh', ['-c', 'command -v "$1"', 'sh', tool], { reject: false });
    if (found.exitCode !== 0) {
      return tool === 'dockerd' || tool === 'docker'
        ? `docker.io is not installed (no ${tool})`
        : `${tool} is not installed`;
    }
  }
  return undefined;
}

async function run(file: string, args: readonly string[]): Promise<string> {
  return (await execa(file, args)).stdout;
}

async function waitForEngine(dockerHost: string, deadline: number): Promise<void> {
  for (;;) {
    const probe = await execa('docker', ['-H', dockerHost, 'version', '--format', '{{.Server.Version}}'], {
      reject: false,
    });
    if (probe.exitCode === 0) return;
    if (Date.now() > deadline) throw new Error(`the engine at ${dockerHost} did not answer: ${probe.stderr}`);
    await sleep(200);
  }
}

/** Signals a process that may have exited already (a killed node's dockerd). */
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // already gone
  }
}

/** SIGKILL every process in a network namespace. */
async function killAllIn(netns: string): Promise<void> {
  const pids = (await execa('ip', ['netns', 'pids', netns], { reject: false })).stdout;
  for (const pid of pids.split('\n').filter(Boolean)) signal(Number(pid), 'SIGKILL');
}

/** `dir` and every cgroup below it, deepest first. */
async function cgroupTree(dir: string): Promise<string[]> {
  if (!(await isDir(dir))) return [];
  const entries = await readdir(dir, { withFileTypes: true });
  const below = await Promise.all(
    entries.filter((e) => e.isDirectory()).map((e) => cgroupTree(join(dir, e.name))),
  );
  return [...below.flat(), dir];
}

async function isDir(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isDirectory() ?? false;
}

/**
 * SIGKILL every process in the cgroup `name` (a node engine's `--cgroup-parent`) and remove it, in every
 * hierarchy that has it. A sandbox container has a network namespace of its own, so killing the node's
 * namespace leaves it running; its cgroup names it as that node's.
 */
async function killCgroup(name: string): Promise<void> {
  const top = '/sys/fs/cgroup';
  const hierarchies = [top, ...(await readdir(top).catch(() => [] as string[])).map((h) => join(top, h))];
  const roots = (
    await Promise.all(hierarchies.map(async (h) => ((await isDir(join(h, name))) ? [join(h, name)] : [])))
  ).flat();
  for (let round = 0; round < 50; round++) {
    let found = 0;
    for (const root of roots) {
      for (const dir of await cgroupTree(root)) {
        const procs = await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '');
        for (const pid of procs.split('\n').filter(Boolean)) {
          signal(Number(pid), 'SIGKILL');
          found++;
        }
      }
    }
    if (found === 0) break;
    await sleep(100);
  }
  for (const root of roots) for (const dir of await cgroupTree(root)) await rmdir(dir).catch(() => undefined);
}

/** The cgroup a node's engine puts its containers under: named as the node's network namespace. */
const nodeCgroup = (tag: string, i: number): string => `${tag}n${i}`;

/** Pids of processes still in a node's container cgroup (none once the cluster is destroyed). */
export async function processesLeftOn(nodes: readonly SwarmNodeProcess[]): Promise<number[]> {
  const left: number[] = [];
  for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
    const cgroups = await readFile(`/proc/${pid}/cgroup`, 'utf8').catch(() => '');
    if (nodes.some((n) => cgroups.includes(`:/${n.netns}/`))) left.push(Number(pid));
  }
  return left;
}

/** Waits until `pid` has left this process's UTS namespace (unshare ran). */
async function ownUtsNamespace(pid: number, deadline: number): Promise<void> {
  const host = await readlink('/proc/self/ns/uts');
  for (;;) {
    const its = await readlink(`/proc/${pid}/ns/uts`).catch(() => host);
    if (its !== host) return;
    if (Date.now() > deadline) throw new Error(`process ${pid} never entered its own UTS namespace`);
    await sleep(10);
  }
}

export async function createSwarmCluster(options: SwarmClusterOptions): Promise<SwarmCluster> {
  const log = options.log ?? (() => undefined);
  // Short unique names: interface names hold 15 characters.
  const tag = `afs${(process.pid % 10000).toString(36)}${Math.floor(Math.random() * 36 ** 2).toString(36)}`;
  const subnet = `10.231.${Math.floor(Math.random() * 250) + 1}`;
  const state = await mkdtemp('/tmp/af-swarm-');
  const bridge = `${tag}b`;
  const nodes: SwarmNodeProcess[] = [];
  const netnses: string[] = [];
  let destroyed = false;

  const destroy = async (): Promise<void> => {
    if (destroyed) return;
    destroyed = true;
    for (const node of nodes) signal(node.pid, 'SIGTERM');
    await sleep(nodes.length > 0 ? 2000 : 0);
    // Whatever still runs in a namespace is ours: dockerd, containerd, shims; and in a node's cgroup, the
    // sandbox containers (each in a network namespace of its own).
    for (const netns of netnses) await killAllIn(netns);
    for (let i = 1; i <= netnses.length; i++) await killCgroup(nodeCgroup(tag, i));
    await sleep(500);
    const mountinfo = await readFile('/proc/self/mountinfo', 'utf8');
    const below = mountinfo
      .split('\n')
      .map((line) => line.split(' ')[4] ?? '')
      .filter((target) => target.startsWith(`${state}/`))
      .sort((a, b) => b.length - a.length);
    for (const target of below) await execa('umount', ['--lazy', target], { reject: false });
    for (const netns of netnses) await execa('ip', ['netns', 'delete', netns], { reject: false });
    await execa('ip', ['link', 'delete', bridge], { reject: false });
    await rm(state, { recursive: true, force: true });
  };

  try {
    await run('ip', ['link', 'add', bridge, 'type', 'bridge']);
    await run('ip', ['link', 'set', bridge, 'up']);
    await run('ip', ['addr', 'add', `${subnet}.254/24`, 'dev', bridge]);
    const deadline = Date.now() + 60_000;
    for (let i = 1; i <= options.nodes; i++) {
      const netns = `${tag}n${i}`;
      const hostname = `swarm-${i}`;
      const address = `${subnet}.${i}`;
      await run('ip', ['netns', 'add', netns]);
      netnses.push(netns);
      await run('ip', ['link', 'add', `${tag}h${i}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns]);
      await run('ip', ['link', 'set', `${tag}h${i}`, 'master', bridge, 'up']);
      await run('ip', ['-n', netns, 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
      await run('ip', ['-n', netns, 'link', 'set', 'eth0', 'up']);
      await run('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
      const dir = join(state, `n${i}`);
      await mkdir(dir);
      await writeFile(join(dir, 'daemon.json'), '{}');
      const socket = join(dir, 'docker.sock');
      // nsenter, not `ip netns exec` (which remounts /sys); unshare --uts gives the node its hostname.
      const child = spawn(
        'unshare',
        [
          '--uts',
          '--',
          'nsenter',
          `--net=/run/netns/${netns}`,
          '--',
          'dockerd',
          `--data-root=${join(dir, 'data')}`,
          `--exec-root=${join(dir, 'exec')}`,
          `--pidfile=${join(dir, 'dockerd.pid')}`,
          `--config-file=${join(dir, 'daemon.json')}`,
          `--host=unix://${socket}`,
          `--cgroup-parent=/${nodeCgroup(tag, i)}`,
          ...DOCKERD_FLAGS,
        ],
        { stdio: ['ignore', 'ignore', 'ignore'], detached: true },
      );
      child.unref();
      if (child.pid === undefined) throw new Error(`dockerd of ${hostname} did not start`);
      // The hostname is set before the node joins the Swarm, which is when its description is read;
      // and only once the process is in its own UTS namespace, never the host's.
      await ownUtsNamespace(child.pid, deadline);
      await run('nsenter', [`--uts=/proc/${child.pid}/ns/uts`, '--', 'hostname', hostname]);
      nodes.push({ hostname, address, netns, dockerHost: `unix://${socket}`, pid: child.pid });
    }
    for (const node of nodes) await waitForEngine(node.dockerHost, deadline);
    log(`${nodes.length} engines answer`);

    const [manager, ...workers] = nodes as [SwarmNodeProcess, ...SwarmNodeProcess[]];
    const m = ['-H', manager.dockerHost];
    await run('docker', [
      ...m,
      'swarm',
      'init',
      `--advertise-addr=${manager.address}`,
      `--listen-addr=${manager.address}:2377`,
      `--dispatcher-heartbeat=${options.heartbeat}`,
    ]);
    const token = (await run('docker', [...m, 'swarm', 'join-token', '-q', 'worker'])).trim();
    for (const worker of workers) {
      await run('docker', [
        '-H',
        worker.dockerHost,
        'swarm',
        'join',
        `--token=${token}`,
        `--advertise-addr=${worker.address}`,
        `--listen-addr=${worker.address}:2377`,
        `${manager.address}:2377`,
      ]);
    }
    const ids = (await run('docker', [...m, 'node', 'ls', '-q'])).split('\n').filter(Boolean);
    for (const id of ids)
      await run('docker', [...m, 'node', 'update', `--label-add=${options.nodeLabel}=true`, id]);
    log(`Swarm of ${ids.length} nodes`);

    // AgentFense's base image (Debian with a shell: the sandbox service's command is a shell that waits
    // for the node agent), imported on the manager from the cached root filesystem and loaded into the
    // others (no registry: save, then load).
    const image = DEFAULT_IMAGE;
    await ensureBaseImage({
      dockerHost: manager.dockerHost,
      cacheDir: process.env['AF_IMAGE_CACHE_DIR'] ?? '/var/cache/agentfense',
      progress: (line) => log(line),
    });
    const saved = join(state, 'saved.tar');
    await run('docker', [...m, 'save', '--output', saved, image]);
    for (const worker of workers) await run('docker', ['-H', worker.dockerHost, 'load', '--input', saved]);
    await rm(saved);
    log(`image ${image} on every node`);

    return {
      nodes,
      manager,
      image,
      hostAddress: `${subnet}.254`,
      stateDir: state,
      kill: (node) => process.kill(node.pid, 'SIGKILL'),
      killNode: async (node) => {
        await killAllIn(node.netns);
        await killCgroup(nodeCgroup(tag, nodes.indexOf(node) + 1));
      },
      destroy,
    };
  } catch (error) {
    await destroy();
    throw error;
  }
}
