// HTTP API load: `agentfense serve` on loopback, 50 concurrent clients each running
// create+start → exec → destroy cycles over one codebase, through keep-alive connections. Prints
// throughput and p50/p99 per request kind and per cycle, then checks that no request failed and nothing
// leaked: no mount left under the data directory, no process left under the server, and the server's
// open file descriptors back to what they were after the warm-up. Run as root after `pnpm build`:
// `node packages/control/bench/http.bench.js` (AF_BENCH_HTTP_CLIENTS, AF_BENCH_HTTP_ROUNDS change the
// load; AF_BENCH_HTTP_MAX_STARTS the server's --max-starts). Exits 1 when a request failed or something
// leaked.
import { spawn } from 'node:child_process';
import console from 'node:console';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../bin/agentfense.js', import.meta.url));
const CLIENTS = Number(process.env.AF_BENCH_HTTP_CLIENTS ?? 50);
const ROUNDS = Number(process.env.AF_BENCH_HTTP_ROUNDS ?? 4);
/** Passed to `serve --max-starts` when set (default: the server's, the CPU count). */
const MAX_STARTS = process.env.AF_BENCH_HTTP_MAX_STARTS;
const WARMUP = 3;
/** How long descriptors and processes get to go back to their baseline after the load. */
const SETTLE_MS = 10_000;

/** The value at fraction `q` of `values`. */
function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** One JSON request over `agent`; resolves with { status, body } (never rejects on an HTTP status). */
function call(base, agent, method, path, body) {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}${path}`,
      {
        method,
        agent,
        headers:
          payload === undefined
            ? {}
            : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => {
          let parsed;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = text;
          }
          resolve({ status: res.statusCode, body: parsed });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** Starts the server and resolves with its URL and process once it listens. */
async function startServer(dataDir) {
  const args = [
    BIN,
    'serve',
    '--insecure-no-auth',
    '--listen',
    '127.0.0.1:0',
    '--grpc-listen',
    '',
    '--data',
    dataDir,
  ];
  if (MAX_STARTS !== undefined) args.push('--max-starts', MAX_STARTS);
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'inherit', 'pipe'],
  });
  let seen = '';
  const url = await new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk) => {
      seen += chunk;
      const match = /serving (http:\/\/\S+) /.exec(seen);
      if (match !== null) resolve(match[1]);
    });
    child.on('exit', (code) => reject(new Error(`serve exited (${code}): ${seen}`)));
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { url, child, exited, output: () => seen };
}

async function openFds(pid) {
  return (await readdir(`/proc/${pid}/fd`)).length;
}

/** Pids of every process below `pid` (workers, bwrap, sandboxed commands). */
async function descendants(pid) {
  const parents = new Map();
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    parents.set(Number(name), ppid);
  }
  const out = [];
  const frontier = [pid];
  while (frontier.length > 0) {
    const parent = frontier.pop();
    for (const [child, ppid] of parents) {
      if (ppid === parent) {
        out.push(child);
        frontier.push(child);
      }
    }
  }
  return out;
}

async function mountsUnder(dir) {
  const text = await readFile('/proc/self/mountinfo', 'utf8');
  return text
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((mountpoint) => mountpoint.startsWith(dir));
}

/** Polls `measure` until it returns `target` or SETTLE_MS pass; returns the last value. */
async function settle(measure, target) {
  const deadline = Date.now() + SETTLE_MS;
  let value = await measure();
  while (value > target && Date.now() < deadline) {
    await sleep(100);
    value = await measure();
  }
  return value;
}

const root = await mkdtemp(join(tmpdir(), 'af-bench-http-'));
const dataDir = join(root, 'data');
const server = await startServer(dataDir);
const problems = [];
try {
  const setup = new Agent({ keepAlive: true });
  const codebase = await call(server.url, setup, 'POST', '/v1/codebases', {
    name: 'bench',
    owner_id: 'bench',
  });
  if (codebase.status !== 200) throw new Error(`create codebase: ${JSON.stringify(codebase.body)}`);
  const cb = codebase.body.id;
  for (const [path, content] of [
    ['src/app.py', 'print("hello")\n'],
    ['README.md', '# bench\n'],
  ]) {
    const put = await new Promise((resolve, reject) => {
      const req = request(
        `${server.url}/v1/codebases/${cb}/files/${path}`,
        { method: 'PUT', agent: setup },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode));
        },
      );
      req.on('error', reject);
      req.end(content);
    });
    if (put !== 200) throw new Error(`upload ${path}: status ${put}`);
  }

  const times = { create: [], exec: [], destroy: [], cycle: [] };
  let failures = 0;
  const failure = (what, answer) => {
    failures += 1;
    if (failures <= 5) console.error(`FAILED ${what}: ${JSON.stringify(answer).slice(0, 300)}`);
  };

  /** create+start → exec → destroy; records latencies when `record`. */
  const cycle = async (agent, record) => {
    const began = performance.now();
    let t = began;
    const lap = (kind) => {
      const now = performance.now();
      if (record) times[kind].push(now - t);
      t = now;
    };
    const created = await call(server.url, agent, 'POST', '/v1/sandboxes', { codebase_id: cb, start: true });
    lap('create');
    if (created.status !== 200 || created.body.status !== 'SANDBOX_STATUS_RUNNING')
      return failure('create', created);
    const id = created.body.id;
    const exec = await call(server.url, agent, 'POST', `/v1/sandboxes/${id}/exec`, {
      command: 'cat src/app.py',
    });
    lap('exec');
    if (exec.status !== 200 || exec.body.exitCode !== 0 || exec.body.stdout !== 'print("hello")\n')
      failure('exec', exec);
    const destroyed = await call(server.url, agent, 'DELETE', `/v1/sandboxes/${id}`);
    lap('destroy');
    if (destroyed.status !== 200) return failure('destroy', destroyed);
    if (record) times.cycle.push(performance.now() - began);
  };

  // Warm-up: code paths, page cache, the first worker spawns. The baseline is taken after it.
  for (let i = 0; i < WARMUP; i += 1) await cycle(setup, false);
  setup.destroy();
  const pid = server.child.pid;
  await sleep(500);
  const baseFds = await openFds(pid);
  const baseProcs = (await descendants(pid)).length;

  console.log(
    `HTTP load: ${CLIENTS} concurrent clients × ${ROUNDS} cycles of create+start → exec → destroy` +
      ` (server --max-starts ${MAX_STARTS ?? 'default'}, ${availableParallelism()} CPUs, load ${loadavg()[0].toFixed(1)})`,
  );
  const agents = Array.from({ length: CLIENTS }, () => new Agent({ keepAlive: true, maxSockets: 1 }));
  const began = performance.now();
  await Promise.all(
    agents.map(async (agent) => {
      for (let i = 0; i < ROUNDS; i += 1) {
        try {
          await cycle(agent, true);
        } catch (err) {
          failure('request', String(err));
        }
      }
    }),
  );
  const elapsed = (performance.now() - began) / 1000;
  for (const agent of agents) agent.destroy();

  const cycles = times.cycle.length;
  const requests = times.create.length + times.exec.length + times.destroy.length;
  console.log(
    `throughput: ${(cycles / elapsed).toFixed(2)} cycles/s, ${(requests / elapsed).toFixed(1)} requests/s ` +
      `(${cycles} cycles, ${requests} requests in ${elapsed.toFixed(1)} s)`,
  );
  for (const kind of ['create', 'exec', 'destroy', 'cycle']) {
    const label = kind === 'create' ? 'create+start' : kind;
    console.log(
      `${label.padEnd(12)} p50 ${quantile(times[kind], 0.5).toFixed(1).padStart(8)} ms   p99 ${quantile(times[kind], 0.99).toFixed(1).padStart(8)} ms`,
    );
  }

  if (failures > 0) problems.push(`${failures} request(s) failed`);
  if (cycles !== CLIENTS * ROUNDS) problems.push(`${CLIENTS * ROUNDS - cycles} cycle(s) did not complete`);
  const fds = await settle(() => openFds(pid), baseFds);
  const procs = await settle(async () => (await descendants(pid)).length, baseProcs);
  const mounts = await mountsUnder(dataDir);
  const listed = await call(server.url, undefined, 'GET', `/v1/sandboxes?codebase_id=${cb}`);
  console.log(
    `leaks: server fds ${fds} (baseline ${baseFds}), processes under the server ${procs} (baseline ${baseProcs}), ` +
      `mounts under the data dir ${mounts.length}, sandboxes left ${listed.body.sandboxes.length}`,
  );
  if (fds > baseFds) problems.push(`file descriptors leaked: ${fds} > ${baseFds}`);
  if (procs > baseProcs) problems.push(`processes leaked: ${procs} > ${baseProcs}`);
  if (mounts.length > 0) problems.push(`mounts leaked: ${mounts.join(', ')}`);
  if (listed.body.sandboxes.length > 0) problems.push(`${listed.body.sandboxes.length} sandbox(es) left`);
} catch (err) {
  problems.push(err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  server.child.kill('SIGTERM');
  const { code, signal } = await server.exited;
  if (code !== 0) problems.push(`serve exited ${code ?? signal} at SIGTERM: ${server.output()}`);
  const mounts = await mountsUnder(dataDir);
  if (mounts.length > 0) problems.push(`mounts left after shutdown: ${mounts.join(', ')}`);
  await rm(root, { recursive: true, force: true });
}
if (problems.length > 0) {
  for (const problem of problems) console.error(`PROBLEM: ${problem}`);
  process.exit(1);
}
console.log('no request failed; no mount, process or file descriptor leaked');
