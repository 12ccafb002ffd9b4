// Attack: make a sandbox's network policy point (a root Node process on the host, outside the sandbox's
// cgroups) hold memory or burn CPU that the sandbox's own limits deny it: hundreds of connections whose
// answers it never reads (each holds the policy point's buffers), DNS questions as fast as it can send
// them. Defence: each policy point runs in a cgroup of its own (control sandboxes/network-cgroup.ts,
// `<hierarchy>/agentfense-network/<id>`) bounded at 128 MiB + 1/16 of its sandbox's memory and at its
// sandbox's CPU quota; past the memory bound the kernel kills it, which ends that sandbox's network only
// and says why in the sandbox's state reason; another sandbox's network carries on. DNS over TCP answers
// at most 16 questions ahead of a client and stops reading while its answers wait to be taken.
import { execFile, spawn } from 'node:child_process';
import { access, mkdir, readFile, writeFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { DataLayout, NETWORK_CGROUP_PARENT, networkMemoryBound } from '@agentfense/control';
import { netnsPathOf } from '@agentfense/network';
import { detectCgroupHost } from '@agentfense/protocol';
import { waitFor } from '../helpers/control-fixtures.js';
import { useNetworkFixture } from '../helpers/network-fixture.js';
import { python } from '../helpers/security-control.js';
import type { NetworkFixture } from '../helpers/network-fixture.js';
import { TEST_ADDRESSES } from '../helpers/test-net.js';

const run = promisify(execFile);
const MiB = 1024 * 1024;
const CURL = 'curl -s -S -m 5 -o /dev/null -w "%{http_code}"';
/** The bound these tests give every policy point (share 0): an idle one holds ~20 MiB of it. */
const BOUND = 48 * MiB;
/** What a policy point allocates between its fork and its placement, charged to the control plane's cgroup. */
const PRE_PLACEMENT = 6 * MiB;

/** Where the policy point cgroups live on this host: memory's and cpu's directories and files. */
const host = await detectCgroupHost();
const v2 = host.v2?.controllers.has('memory') === true ? host.v2.path : null;
const memoryRoot = v2 ?? host.v1.get('memory') ?? null;
const cpuRoot = v2 ?? host.v1.get('cpu') ?? null;
const limitFile = v2 === null ? 'memory.limit_in_bytes' : 'memory.max';

/** The pid listening on the sandbox's proxy port inside its namespace: its policy point. */
async function policyPointPid(fx: NetworkFixture, id: string): Promise<number> {
  const netns = netnsPathOf(new DataLayout(fx.dirs.dataDir).sandbox(id).state);
  const { stdout } = await run('nsenter', [`--net=${netns}`, 'ss', '-Hltnp', 'sport = :3128']);
  const pid = /pid=(\d+)/.exec(stdout)?.[1];
  if (pid === undefined) throw new Error(`no policy point listens in ${netns}: ${stdout}`);
  return Number(pid);
}

/** The cgroup path of `pid` in the hierarchy holding `controller` (v2: the one unified line). */
async function cgroupOf(pid: number, controller: 'memory' | 'cpu'): Promise<string | undefined> {
  const lines = (await readFile(`/proc/${String(pid)}/cgroup`, 'utf8')).trim().split('\n');
  for (const line of lines) {
    const [, controllers, path] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
    if (controllers === undefined || path === undefined) continue;
    if (v2 !== null ? controllers === '' : controllers.split(',').includes(controller)) return path;
  }
  return undefined;
}

/** CPU time (user + system) a process used so far, in seconds. */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${String(pid)}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
}

/** A process's private memory (RssAnon), in bytes; 0 once it is gone. */
async function privateRss(pid: number): Promise<number> {
  const status = await readFile(`/proc/${String(pid)}/status`, 'utf8').catch(() => '');
  return Number(/^RssAnon:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024;
}

describe.skipIf(memoryRoot === null || cpuRoot === null)(
  `the policy point's memory and CPU are the sandbox's${memoryRoot === null ? ' (skipped: no cgroup memory controller)' : ''}`,
  () => {
    const fx = useNetworkFixture({ networkMemory: { baseBytes: BOUND, share: 0 } });

    it('runs each policy point in a cgroup of its own, bounded from its sandbox (memory, CPU quota), removed with it and after a crash', async () => {
      const memoryBytes = 512 * MiB;
      const cpuQuota = 30_000;
      const sb = await fx().sandbox({ mode: 'open' }, { resources: { memoryBytes, cpuQuota } });
      const pid = await policyPointPid(fx(), sb.id);
      const expected = `/${NETWORK_CGROUP_PARENT}/${sb.id}`;
      expect(await cgroupOf(pid, 'memory')).toBe(expected);
      expect(await cgroupOf(pid, 'cpu')).toBe(expected);
      const memoryDir = posix.join(memoryRoot ?? '', expected);
      const cpuDir = posix.join(cpuRoot ?? '', expected);
      expect(Number(await readFile(posix.join(memoryDir, limitFile), 'utf8'))).toBe(BOUND);
      expect(networkMemoryBound(memoryBytes)).toBe(160 * MiB); // the default: 128 MiB + 1/16
      if (v2 !== null)
        expect((await readFile(posix.join(cpuDir, 'cpu.max'), 'utf8')).trim()).toBe('30000 100000');
      else expect(Number(await readFile(posix.join(cpuDir, 'cpu.cfs_quota_us'), 'utf8'))).toBe(cpuQuota);
      // A stopped sandbox keeps none.
      await fx().cp.stopSandbox(sb.id);
      for (const dir of [memoryDir, cpuDir])
        await expect(access(dir)).rejects.toMatchObject({ code: 'ENOENT' });
      // What a crashed control plane left (the cgroups, a process in them) is killed and removed when the
      // sandbox's leftovers are cleared: here by its destroy, as by recovery and gc.
      for (const dir of [memoryDir, cpuDir]) await mkdir(dir, { recursive: true });
      const stale = spawn('sleep', ['60'], { stdio: 'ignore' });
      const gone = new Promise((resolve) => stale.once('exit', resolve));
      for (const dir of [memoryDir, cpuDir])
        await writeFile(posix.join(dir, 'cgroup.procs'), String(stale.pid));
      await fx().cp.destroySandbox(sb.id);
      expect(await gone).toBeDefined();
      for (const dir of [memoryDir, cpuDir])
        await expect(access(dir)).rejects.toMatchObject({ code: 'ENOENT' });
    });

    it("a hostile agent's 500 unread connections cannot grow its policy point past the bound: the kernel kills it, that sandbox's network ends saying why, another's carries on", async () => {
      const other = await fx().sandbox({ mode: 'open' });
      const sb = await fx().sandbox({ mode: 'open' });
      const pid = await policyPointPid(fx(), sb.id);
      // Its private memory, sampled: what the bound charges (its shared text is charged elsewhere).
      let peak = 0;
      const sampler = setInterval(() => {
        void privateRss(pid).then((rss) => (peak = Math.max(peak, rss)));
      }, 10);
      // Unbounded, these 500 connections (their echoes never read) took the policy point to 70-87 MiB.
      await sb
        .run(
          python(`
import socket, time
socks = []
for i in range(500):
    try:
        s = socket.create_connection(('${TEST_ADDRESSES.public}', 7), 5)
    except OSError:
        break
    s.setblocking(False); socks.append(s)
data = b'x' * (1 << 20)
for _ in range(4):
    for s in socks:
        try: s.send(data)
        except OSError: pass
time.sleep(1)
print(len(socks))`),
          60_000,
        )
        .finally(() => clearInterval(sampler));
      // Its private memory never went past the bound (plus what it held before it was placed).
      expect(peak).toBeGreaterThan(0);
      expect(peak).toBeLessThan(BOUND + PRE_PLACEMENT);
      // The kernel killed it at the bound: that sandbox's state says so, naming the bound and the fix.
      const reason = await waitFor('the policy point killed at its bound', async () => {
        const why = (await fx().cp.getSandbox(sb.id)).stateReason;
        return why?.startsWith('no network') === true ? why : undefined;
      });
      expect(reason).toMatch(
        /no network: the network policy point went over its memory bound of 48 MiB and the kernel killed it \(.*give the sandbox more memory/,
      );
      // That sandbox runs on without a network; the other sandbox's network, and the control plane, work.
      expect((await sb.run('echo ok')).out).toBe('ok\n');
      expect((await sb.run(`${CURL} http://pub.test/; echo " $?"`)).out).not.toMatch(/^200/);
      expect((await other.run(`${CURL} http://pub.test/`)).out).toBe('200');
      expect((await fx().cp.getSandbox(other.id)).stateReason).toBeNull();
    }, 90_000);

    it('DNS questions pipelined over TCP by a client that never reads the answers are not read ahead of them: the policy point holds a bounded few', async () => {
      const sb = await fx().sandbox({ mode: 'open' });
      const pid = await policyPointPid(fx(), sb.id);
      const idle = await privateRss(pid);
      let peak = idle;
      const sampler = setInterval(() => {
        void privateRss(pid).then((rss) => (peak = Math.max(peak, rss)));
      }, 20);
      // pub.test is allowed: every question has an answer (~40 bytes) that the client never takes.
      const flood = await sb
        .run(
          python(`
import socket, struct, time
q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0) + b'\\x03pub\\x04test\\x00' + struct.pack('>HH', 1, 1)
block = (struct.pack('>H', len(q)) + q) * 2000
s = socket.create_connection(('127.0.0.1', 53), 5)
s.settimeout(2)
sent, end, blocked = 0, time.time() + 8, False
while time.time() < end:
    try:
        s.sendall(block); sent += len(block)
    except socket.timeout:
        blocked = True; break
print(sent, blocked)`),
          60_000,
        )
        .finally(() => clearInterval(sampler));
      const [sent, blocked] = flood.out.trim().split(' ');
      // Unbounded, the policy point read every question and queued every answer: its private memory
      // grew by tens of MiB within the 8 s and the client was never held up.
      expect(blocked, `sent ${sent ?? ''} bytes of questions; ${flood.err}`).toBe('True');
      expect(peak - idle).toBeLessThan(12 * MiB);
      expect((await fx().cp.getSandbox(sb.id)).stateReason).toBeNull();
      expect((await sb.run(`${CURL} http://pub.test/`)).out).toBe('200');
    }, 90_000);

    it("a DNS flood from a sandbox of 0.1 CPU costs its policy point at most 0.1 CPU, and another sandbox's network keeps its pace", async () => {
      const cpuQuota = 10_000; // 0.1 of a core
      const sb = await fx().sandbox({ mode: 'open' }, { resources: { cpuQuota } });
      const other = await fx().sandbox({ mode: 'open' });
      const pid = await policyPointPid(fx(), sb.id);
      const fetches = `s=$(date +%s%N); for i in $(seq 20); do ${CURL} http://pub.test/ >/dev/null; done; echo $(( ($(date +%s%N) - s) / 1000000 ))`;
      const alone = Number((await other.run(fetches)).out.trim());
      const before = await cpuSeconds(pid);
      const started = Date.now();
      // pub.test is allowed: every question is answered (no audit record). Pipelined over TCP, 2,000
      // questions cost the agent one write and the policy point 2,000 answers.
      const flooding = sb.run(
        python(`
import socket, struct, threading, time
q = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0) + b'\\x03pub\\x04test\\x00' + struct.pack('>HH', 1, 1)
block = (struct.pack('>H', len(q)) + q) * 2000
s = socket.create_connection(('127.0.0.1', 53), 5)
def drain():
    try:
        while s.recv(1 << 20): pass
    except OSError:
        pass
threading.Thread(target=drain, daemon=True).start()
sent, end = 0, time.time() + 3
while time.time() < end:
    s.sendall(block); sent += 2000
print(sent)`),
      );
      const during = Number((await other.run(fetches)).out.trim());
      const sent = Number((await flooding).out.trim());
      const used = (await cpuSeconds(pid)) - before;
      const seconds = (Date.now() - started) / 1000;
      expect(sent).toBeGreaterThan(1000);
      // The quota over the flood's span, with a CFS period's worth of slack on each side.
      expect(used).toBeLessThan((cpuQuota / 100_000) * seconds + 0.2);
      expect(during).toBeLessThan(alone * 3 + 1000);
    }, 90_000);
  },
);
