// Long operations through the HTTP API: a sandbox whose delta holds 200,000 added files
// (AF_BENCH_LONG_FILES) is committed through `agentfense serve`, and destroyed while the commit runs. The
// original report: 38 s inside the worker without a health ping answered, and the commit request ended
// 502. Prints how long the commit ran, the slowest answer to other requests meanwhile (sandbox status,
// a command in the sandbox), how long the destroy took, how the commit request ended and what it
// reported, then checks that nothing was lost or half-written: every file the answer lists as applied is
// complete in the codebase, the codebase holds nothing else (no temporary commit file), no health ping
// was missed and the worker was never restarted, and nothing of the sandbox is left (mount, process).
// Run as root after `pnpm build`: `pnpm bench:long-ops`. AF_BENCH_LONG_DESTROY_AFTER=0 lets the commit run
// to its end instead (for the full commit's time). Exits 1 when a check fails.
import { execFileSync, spawn } from 'node:child_process';
import console from 'node:console';
import { mkdir, mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../bin/agentfense.js', import.meta.url));
const FILES = Number(process.env.AF_BENCH_LONG_FILES ?? 200_000);
/** Destroy once this fraction of the files is in the codebase (0: never; the commit runs to its end). */
const DESTROY_AFTER = Number(process.env.AF_BENCH_LONG_DESTROY_AFTER ?? 0.3);
/** The control plane's health ping timeout: an answer slower than this would count as a missed ping. */
const PING_TIMEOUT_MS = 2000;
/** Extra characters in each file name (longer names: fewer entries per answer part). */
const PAD = 'x'.repeat(Number(process.env.AF_BENCH_LONG_PAD ?? 0));
/** Keep the data directory (its logs) for a look afterwards. */
const KEEP = process.env.AF_BENCH_LONG_KEEP === '1';

/** One JSON request; resolves with { status, body, ms } (never rejects on an HTTP status). */
function call(base, agent, method, path, body) {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const started = performance.now();
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
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = text;
          }
          resolve({ status: res.statusCode, body: parsed, ms: performance.now() - started });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

function ok(res, what) {
  if (res.status !== 200) throw new Error(`${what}: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Writes `files` one-line files under `dir` in 500 subdirectories (python: one process, fast). */
function writeFiles(dir, files) {
  execFileSync('python3', [
    '-c',
    'import os,sys\nd=sys.argv[1]\npad=sys.argv[3]\nfor i in range(int(sys.argv[2])):\n' +
      "    sub=os.path.join(d,'d%03d'%(i%500))\n    os.makedirs(sub,exist_ok=True)\n" +
      "    with open(os.path.join(sub,'f%06d%s.txt'%(i,pad)),'w') as f: f.write('line %d\\n'%i)\n",
    dir,
    String(files),
    PAD,
  ]);
}

/**
 * Checks the codebase's output/ against the applied list: prints "<files> <bad>" where bad counts
 * files whose content is wrong plus files present but not listed as applied (python: fast).
 */
function checkCodebase(dir, appliedListFile) {
  return execFileSync('python3', [
    '-c',
    'import os,sys,re\nd=sys.argv[1]\napplied=set(open(sys.argv[2]).read().split())\nn=0\nbad=[]\n' +
      'for root,_,names in os.walk(d):\n    for name in names:\n        n+=1\n' +
      '        p=os.path.join(root,name)\n        rel="/output/"+os.path.relpath(p,d)\n' +
      '        m=re.match(r"f(\\d+)x*\\.txt$",name)\n' +
      '        if rel not in applied or m is None or open(p).read()!="line %d\\n"%int(m.group(1)): bad.append(rel)\n' +
      'print(n,len(bad),*bad[:5])\n',
    dir,
    appliedListFile,
  ])
    .toString()
    .trim()
    .split(' ');
}

/** Counts files (not directories) under `dir`. */
function countFiles(dir) {
  try {
    return Number(execFileSync('sh', ['-c', 'find "$1" -type f | wc -l', 'sh', dir]).toString().trim());
  } catch {
    return 0;
  }
}

const dataDir = await mkdtemp(join(tmpdir(), 'af-bench-long-'));
const agent = new Agent({ keepAlive: true, maxSockets: 8 });
const failures = [];
const check = (cond, what) => {
  console.log(`  ${cond ? 'ok  ' : 'FAIL'} ${what}`);
  if (!cond) failures.push(what);
};
let server;
let workerLog;
try {
  server = spawn(
    process.execPath,
    [BIN, 'serve', '--insecure-no-auth', '--listen', '127.0.0.1:0', '--grpc-listen', '', '--data', dataDir],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let serverOutput = '';
  server.stderr.on('data', (chunk) => (serverOutput += chunk.toString()));
  const base = await new Promise((resolve, reject) => {
    const onData = () => {
      const match = /serving (http:\/\/\S+) /.exec(serverOutput);
      if (match !== null) resolve(match[1]);
    };
    server.stderr.on('data', onData);
    server.on('exit', (code) => reject(new Error(`serve exited early (${code}): ${serverOutput}`)));
  });

  const codebase = ok(
    await call(base, agent, 'POST', '/v1/codebases', { name: 'long-ops' }),
    'create codebase',
  );
  const codebaseFiles = join(dataDir, 'codebases', codebase.id, 'files');
  await mkdir(join(codebaseFiles, 'output'), { recursive: true });
  const sandbox = ok(
    await call(base, agent, 'POST', '/v1/sandboxes', {
      codebase_id: codebase.id,
      permissions: [{ pattern: '**', permission: 'write' }],
    }),
    'create sandbox',
  );
  const id = sandbox.id;
  // The delta as a long agent session leaves it, written before the worker starts.
  const t0 = performance.now();
  writeFiles(join(dataDir, 'sandboxes', id, 'delta', 'upper', 'output'), FILES);
  console.log(`${FILES} files written into the delta in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  ok(await call(base, agent, 'POST', `/v1/sandboxes/${id}/start`), 'start');

  // Other requests while the commit runs: the sandbox's status every 100 ms, a command every 500 ms.
  let committing = true;
  const slowest = { status: 0, exec: 0 };
  let execs = 0;
  let restartCount = 0;
  const watchers = [
    (async () => {
      while (committing) {
        const r = await call(base, agent, 'GET', `/v1/sandboxes/${id}`);
        if (r.status === 200) restartCount = Math.max(restartCount, r.body.restartCount);
        slowest.status = Math.max(slowest.status, r.ms);
        await sleep(100);
      }
    })(),
    (async () => {
      while (committing) {
        const r = await call(base, agent, 'POST', `/v1/sandboxes/${id}/exec`, {
          command: `cat /workspace/output/d000/f000000${PAD}.txt`,
        });
        if (r.status !== 200) break; // destroyed meanwhile
        if (r.body.stdout !== 'line 0\n') failures.push(`a command during the commit read ${r.body.stdout}`);
        slowest.exec = Math.max(slowest.exec, r.ms);
        execs += 1;
        await sleep(500);
      }
    })(),
  ];

  const commitStarted = performance.now();
  const commit = call(base, agent, 'POST', `/v1/sandboxes/${id}/commit`, { mode: 'detect-conflicts' });
  let destroy;
  if (DESTROY_AFTER > 0) {
    const threshold = Math.floor(FILES * DESTROY_AFTER);
    let settled = false;
    void commit.finally(() => (settled = true));
    while (!settled && countFiles(join(codebaseFiles, 'output')) < threshold) await sleep(500);
    // Held open: the destroy removes the file, and its lines say where the stop's time went.
    workerLog = await open(join(dataDir, 'sandboxes', id, 'worker.log'), 'r');
    const destroyStarted = performance.now();
    destroy = call(base, agent, 'DELETE', `/v1/sandboxes/${id}`).then((r) => ({
      ...r,
      ms: performance.now() - destroyStarted,
      atMs: destroyStarted - commitStarted,
    }));
  }
  const committed = await commit;
  const commitMs = performance.now() - commitStarted;
  const destroyed = await destroy;
  committing = false;
  await Promise.all(watchers);

  const applied = committed.status === 200 ? committed.body.applied.filter((c) => c.type !== 'dir') : [];
  const load = loadavg()[0].toFixed(1);
  console.log(`\n${FILES}-file commit through the HTTP API (load ${load}):`);
  console.log(`  commit request: HTTP ${committed.status} after ${(commitMs / 1000).toFixed(1)} s`);
  if (committed.status !== 200) console.log(`  ${JSON.stringify(committed.body).slice(0, 500)}`);
  else console.log(`  interrupted: ${JSON.stringify(committed.body.interrupted)}`);
  console.log(`  files applied: ${applied.length} of ${FILES}`);
  if (destroyed !== undefined) {
    console.log(
      `  destroy: sent ${(destroyed.atMs / 1000).toFixed(1)} s into the commit, HTTP ${destroyed.status} ` +
        `after ${destroyed.ms.toFixed(0)} ms`,
    );
  }
  console.log(`  slowest sandbox status answer meanwhile: ${slowest.status.toFixed(0)} ms`);
  console.log(`  slowest command meanwhile: ${slowest.exec.toFixed(0)} ms (${execs} commands)`);

  const listFile = join(dataDir, 'applied.txt');
  await import('node:fs/promises').then((fs) =>
    fs.writeFile(listFile, applied.map((c) => c.path).join('\n')),
  );
  const [present, bad, ...examples] = checkCodebase(join(codebaseFiles, 'output'), listFile);
  const controlLog = await readFile(join(dataDir, 'logs', 'control.log'), 'utf8').catch(() => '');
  const missedPings = controlLog.split('\n').filter((l) => l.includes('did not answer a health check'));
  if (process.env.AF_BENCH_LONG_WORKER_LOG === '1' && workerLog !== undefined) {
    for (const line of (await workerLog.readFile('utf8')).split('\n').slice(-20))
      console.log(line.slice(0, 300));
  }
  console.log('checks:');
  check(committed.status === 200, 'the commit request ends 200 (not 502)');
  if (destroyed !== undefined) {
    check(destroyed.status === 200, 'the destroy request ends 200');
    check(applied.length > 0 && applied.length < FILES, 'the commit stopped part-way, between two files');
  } else {
    check(applied.length === FILES, 'every file was applied');
  }
  check(Number(present) === applied.length, `the codebase holds exactly the applied files (${present})`);
  check(Number(bad) === 0, `every applied file is complete, nothing else was written ${examples.join(' ')}`);
  check(missedPings.length === 0, `no health ping missed (${missedPings.length} in the control log)`);
  check(restartCount === 0, 'the worker was never restarted');
  check(slowest.status < PING_TIMEOUT_MS, 'the sandbox status answered within the ping timeout throughout');
  const mounts = (await readFile('/proc/mounts', 'utf8')).split('\n').filter((l) => l.includes(dataDir));
  if (destroyed !== undefined) check(mounts.length === 0, 'no mount of the sandbox left');
  else ok(await call(base, agent, 'DELETE', `/v1/sandboxes/${id}`), 'destroy');
} catch (err) {
  failures.push(String(err?.stack ?? err));
  console.error(err);
} finally {
  agent.destroy();
  await workerLog?.close();
  if (server !== undefined && server.exitCode === null) {
    const exited = new Promise((resolve) => server.once('exit', resolve));
    server.kill('SIGTERM');
    await exited;
  }
  if (KEEP) console.log(`data directory kept: ${dataDir}`);
  else await rm(dataDir, { recursive: true, force: true });
}
if (failures.length > 0) {
  console.error(`\n${failures.length} check(s) failed:`);
  for (const failure of failures) console.error(`  ${failure}`);
  process.exitCode = 1;
}
