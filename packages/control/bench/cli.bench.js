// One-shot CLI benchmark: the wall time of single `agentfense` invocations, as an agent or a
// script calling the CLI once per command pays it, against baselines measured in the same run:
//   - `node -e 0` (what any Node CLI pays to exist);
//   - a bare bwrap wrapper equivalent to Anthropic's sandbox-runtime (`srt`, also a Node program around
//     bwrap): a Node script that spawns bwrap with the network and the filesystem unshared (read-only
//     host root, the codebase bound writable, new /proc and /dev, new pid namespace) and passes the
//     command's status through (bench/bwrap-wrapper.js); the same bwrap argv from a shell script is
//     printed for reference;
//   - `agentfense run DIR -- true` in-process (AGENTFENSE_RUN_HELPER=0, the path of a data directory's
//     first run), the same through the data directory's warm run helper (src/cli/run-helper/: every
//     later run) with its spare sandbox (the default: the helper keeps one started for the next identical
//     run) and without it (AGENTFENSE_RUN_HELPER_SPARE=0), `agentfense explain /a`, `agentfense --help`.
// BENCH_CLI_BEFORE=<another checkout's packages/control/bin/agentfense.js> adds the same three commands of
// that build (its own data directory) to every round, so a change is measured before/after, paired.
// Rounds are paired (every command once per round, in the same order), figures are medians, and the
// targets are ratios against the baselines of the same run: run (default) ≤ 1.2× the wrapper, run ≤ 350 ms,
// explain ≤ 3× node, --help ≤ 2× node. The step breakdown of `run` comes from `run -v` and the control
// plane's own `sandbox started` log record. Run as root: `pnpm bench:cli` (builds first). The temporary
// directory is removed on success, failure and SIGINT/SIGTERM; exits 1 when a command fails.
import { spawn } from 'node:child_process';
import console from 'node:console';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const ROUNDS = Number(process.env['BENCH_CLI_ROUNDS'] ?? 10);
/**
 * Idle time before each timed command: what one command leaves working in the background (the in-process
 * run's reaper, the run helper's teardown, the pool's refill, a spare sandbox's start) finishes instead of
 * landing in the next command's figure, as between the commands of an agent, which thinks in between.
 */
const PAUSE_MS = Number(process.env['BENCH_CLI_PAUSE_MS'] ?? 400);
const here = dirname(fileURLToPath(import.meta.url));
const CLI = join(here, '..', 'bin', 'agentfense.js');
const WRAPPER = join(here, 'bwrap-wrapper.js');
const BEFORE = process.env['BENCH_CLI_BEFORE'];

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const ms = (n) => `${n.toFixed(0)} ms`;

/** Runs argv to completion; resolves with wall time and output, rejects on a non-zero status. */
function timed(argv, env) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(argv[0], argv.slice(1), {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    const out = [];
    const err = [];
    child.stdout.on('data', (c) => out.push(c));
    child.stderr.on('data', (c) => err.push(c));
    child.once('error', reject);
    child.once('close', (code) => {
      const wall = performance.now() - started;
      const stderr = Buffer.concat(err).toString();
      if (code === 0) resolve({ wall, stdout: Buffer.concat(out).toString(), stderr });
      else reject(new Error(`${argv.join(' ')} exited ${code}: ${stderr.trim()}`));
    });
  });
}

/** `run -v` prints "agentfense: <step> (+N ms)" lines. */
function parseSteps(stderr) {
  const steps = {};
  for (const m of stderr.matchAll(/^agentfense: (.+?) \(\+(\d+) ms\)$/gm)) {
    const name = m[1].startsWith('created')
      ? 'created'
      : m[1].startsWith('took started sandbox')
        ? 'took a started sandbox'
        : m[1].replace(/ \(.*$/, '');
    steps[name] = Number(m[2]);
  }
  return steps;
}

let work;
/** `run` leaves its sandbox's teardown to a detached reaper (src/cli/watchdog.ts): wait for those first. */
async function reapersDone() {
  for (let i = 0; i < 300; i++) {
    const found = await new Promise((done) =>
      spawn('pgrep', ['-f', `reaper.js --data ${join(work, 'data')}`]).once('exit', (code) =>
        done(code === 0),
      ),
    );
    if (!found) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}
/** The run helper of the helper line's data directory exits on SIGTERM (its sandboxes removed first). */
async function helperDone() {
  const pattern = `run-helper/main.js --data ${work}/data-(helper|spare)$`;
  spawn('pkill', ['-TERM', '-f', pattern]);
  for (let i = 0; i < 300; i++) {
    const found = await new Promise((done) =>
      spawn('pgrep', ['-f', pattern]).once('exit', (code) => done(code === 0)),
    );
    if (!found) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}
async function cleanup() {
  if (work === undefined) return;
  await helperDone();
  await reapersDone();
  await rm(work, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    void cleanup().finally(() => process.exit(130));
  });
}

try {
  work = await mkdtemp(join(tmpdir(), 'agentfense-cli-bench-'));
  const repo = join(work, 'repo');
  const data = join(work, 'data');
  await mkdir(join(repo, 'src'), { recursive: true });
  await writeFile(join(repo, 'README.md'), '# bench repo\n');
  await writeFile(join(repo, 'src', 'a.ts'), 'export const a = 1;\n');
  const shellWrapper = join(work, 'bwrap-wrapper.sh');
  await writeFile(
    shellWrapper,
    '#!/bin/sh\nd="$1"; shift\nexec bwrap --new-session --die-with-parent --unshare-net --unshare-pid ' +
      '--ro-bind / / --bind "$d" "$d" --dev /dev --proc /proc --chdir "$d" -- "$@"\n',
  );
  await chmod(shellWrapper, 0o755);
  const env = { AGENTFENSE_DATA_DIR: data, AGENTFENSE_RUN_HELPER: '0' };
  const helperData = join(work, 'data-helper');
  const spareData = join(work, 'data-spare');
  const commands = {
    'node -e 0': [process.execPath, '-e', '0'],
    'bwrap wrapper (node, srt-like)': [process.execPath, WRAPPER, repo, 'true'],
    'bwrap wrapper (sh)': [shellWrapper, repo, 'true'],
    'agentfense --help': [process.execPath, CLI, '--help'],
    'agentfense explain /a': [process.execPath, CLI, 'explain', '/a'],
    'agentfense run DIR -- true': [process.execPath, CLI, 'run', repo, '-v', '--', 'true'],
    'agentfense run DIR -- true (helper)': [process.execPath, CLI, 'run', repo, '-v', '--', 'true'],
    'agentfense run DIR -- true (spare)': [process.execPath, CLI, 'run', repo, '-v', '--', 'true'],
  };
  const envs = {
    'agentfense run DIR -- true (helper)': {
      AGENTFENSE_DATA_DIR: helperData,
      AGENTFENSE_RUN_HELPER: '1',
      AGENTFENSE_RUN_HELPER_SPARE: '0',
    },
    // The default: the helper with its spare sandbox.
    'agentfense run DIR -- true (spare)': { AGENTFENSE_DATA_DIR: spareData, AGENTFENSE_RUN_HELPER: '1' },
  };
  if (BEFORE !== undefined) {
    commands['before: agentfense --help'] = [process.execPath, BEFORE, '--help'];
    commands['before: agentfense explain /a'] = [process.execPath, BEFORE, 'explain', '/a'];
    commands['before: agentfense run DIR -- true'] = [
      process.execPath,
      BEFORE,
      'run',
      repo,
      '-v',
      '--',
      'true',
    ];
    for (const name of Object.keys(commands)) {
      if (name.startsWith('before:')) envs[name] = { AGENTFENSE_DATA_DIR: join(work, 'data-before') };
    }
  }
  // One untimed warm-up round (page cache, the data directory's first open, the runtime's host cache).
  for (const [name, argv] of Object.entries(commands)) await timed(argv, envs[name] ?? env);
  // The helper line's warm-up run was in-process and started the helper: wait until it listens.
  for (const dir of [helperData, spareData]) {
    for (let i = 0; i < 200; i++) {
      const ready = await stat(join(dir, 'run-helper.sock')).then(
        () => true,
        () => false,
      );
      if (ready) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  // The spare line's first run through the helper starts its own sandbox and leaves the first spare.
  await timed(commands['agentfense run DIR -- true (spare)'], envs['agentfense run DIR -- true (spare)']);
  let spareMisses = 0;
  const walls = Object.fromEntries(Object.keys(commands).map((k) => [k, []]));
  const steps = { after: [], before: [], helper: [], spare: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, argv] of Object.entries(commands)) {
      await new Promise((r) => setTimeout(r, PAUSE_MS));
      const r = await timed(argv, envs[name] ?? env);
      walls[name].push(r.wall);
      if (name.includes('agentfense run')) {
        const s = parseSteps(r.stderr);
        s['rest (spawn, exit; before: load, open)'] = r.wall - Object.values(s).reduce((a, b) => a + b, 0);
        const through = name.endsWith('(helper)') || name.endsWith('(spare)');
        if (through && !r.stderr.includes('handed to the run helper'))
          throw new Error(`the ${name} line ran in-process: ${r.stderr}`);
        if (name.endsWith('(spare)') && !r.stderr.includes('took started sandbox')) spareMisses++;
        const bucket = name.startsWith('before:')
          ? 'before'
          : through
            ? name.slice(name.indexOf('(') + 1, -1)
            : 'after';
        steps[bucket].push(s);
      }
    }
  }
  const started = (await readFile(join(data, 'logs', 'control.log'), 'utf8'))
    .split('\n')
    .filter((l) => l.includes('"sandbox started"'))
    .slice(-ROUNDS)
    .map((l) => JSON.parse(l).ms);

  const load = (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
  console.log(
    `agentfense CLI, ${ROUNDS} paired rounds, ${PAUSE_MS} ms before each command, medians (load avg ${load})`,
  );
  const med = Object.fromEntries(Object.entries(walls).map(([k, v]) => [k, median(v)]));
  for (const [name, value] of Object.entries(med)) console.log(`  ${name.padEnd(32)} ${ms(value)}`);
  for (const [which, list] of Object.entries(steps)) {
    if (list.length === 0) continue;
    const label =
      which === 'helper' || which === 'spare' ? ` (${which})` : BEFORE === undefined ? '' : ` (${which})`;
    console.log(`run steps${label} (median; from run -v):`);
    const stepNames = [...new Set(list.flatMap((s) => Object.keys(s)))];
    for (const name of stepNames)
      console.log(`  ${name.padEnd(40)} ${ms(median(list.map((s) => s[name] ?? 0)))}`);
  }
  if (BEFORE !== undefined) console.log('"sandbox started" record (after):');
  for (const key of ['mounts', 'worker', 'runtime']) {
    if (started.length > 0)
      console.log(`  start: ${key.padEnd(33)} ${ms(median(started.map((s) => s[key])))}`);
  }
  const node = med['node -e 0'];
  const wrapper = med['bwrap wrapper (node, srt-like)'];
  const run = med['agentfense run DIR -- true'];
  const viaHelper = med['agentfense run DIR -- true (helper)'];
  const viaSpare = med['agentfense run DIR -- true (spare)'];
  const verdict = (ok) => (ok ? 'ok' : 'OVER TARGET');
  console.log('targets:');
  console.log(
    `  run (default: helper + spare) / bwrap wrapper (node) = ${(viaSpare / wrapper).toFixed(2)}× (≤ 1.2×: ${verdict(viaSpare <= 1.2 * wrapper)}); ` +
      `run (spare) = ${ms(viaSpare)}; spare not ready in ${spareMisses} of ${ROUNDS} rounds`,
  );
  console.log(
    `  run (helper, AGENTFENSE_RUN_HELPER_SPARE=0) / bwrap wrapper (node) = ${(viaHelper / wrapper).toFixed(2)}×; ` +
      `run (helper) = ${ms(viaHelper)}; run (helper) / node -e 0 = ${(viaHelper / node).toFixed(2)}×`,
  );
  console.log(
    `  run (in-process, a data directory's first) / bwrap wrapper (node) = ${(run / wrapper).toFixed(2)}×; ` +
      `run = ${ms(run)} (≤ 350 ms: ${verdict(run <= 350)}); run / sh wrapper = ${(run / med['bwrap wrapper (sh)']).toFixed(1)}×`,
  );
  const explain = med['agentfense explain /a'] / node;
  const help = med['agentfense --help'] / node;
  console.log(`  explain / node = ${explain.toFixed(2)}× (≤ 3×: ${verdict(explain <= 3)})`);
  console.log(`  --help / node = ${help.toFixed(2)}× (≤ 2×: ${verdict(help <= 2)})`);
  if (BEFORE !== undefined) {
    const ratio = (name) => (med[name] / med[`before: ${name}`]).toFixed(2);
    console.log('after / before (paired, same rounds):');
    for (const name of ['agentfense --help', 'agentfense explain /a', 'agentfense run DIR -- true'])
      console.log(`  ${name.padEnd(32)} ${ratio(name)}× (before ${ms(med[`before: ${name}`])})`);
  }
  await cleanup();
} catch (err) {
  console.error(err);
  await cleanup();
  process.exitCode = 1;
}
