// Commit speed: a sandbox over a linked codebase writes AF_BENCH_COMMIT_FILES small files (2,000 by
// default, one directory of 40 files each), then the control plane commits them into the codebase; repeated
// AF_BENCH_COMMIT_ROUNDS times with a fresh sandbox and codebase each round. Prints the commit's time (the
// library call, the worker's work included) per round, its median and per file, and a baseline measured in
// this process: the same files written by Node directly (copy to a temporary name, rename over) into a
// plain directory, which is what a commit does at the least. Checks that every file arrived with its content.
// Run as root after `pnpm build`: `pnpm bench:commit`. Exits 1 when a check fails.
import console from 'node:console';
import { copyFile, mkdir, mkdtemp, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { ControlPlane } from '../dist/index.js';

const FILES = Number(process.env.AF_BENCH_COMMIT_FILES ?? 2000);
const ROUNDS = Number(process.env.AF_BENCH_COMMIT_ROUNDS ?? 5);
const PER_DIR = 40;

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const ms = (n) => `${n.toFixed(0)} ms`;

/** The shell line that writes the files inside the sandbox (`d<k>/f<i>.txt` holding "content <i>"). */
function writer() {
  return [
    'sh',
    '-c',
    `i=0; while [ $i -lt ${FILES} ]; do d=d$((i / ${PER_DIR})); [ -d $d ] || mkdir $d; ` +
      'echo "content $i" > $d/f$i.txt; i=$((i + 1)); done',
  ];
}

/** Files of `dir` that do not hold what the sandbox wrote, and the count found. */
async function check(dir) {
  let found = 0;
  const wrong = [];
  for (let i = 0; i < FILES; i++) {
    const path = join(dir, `d${Math.floor(i / PER_DIR)}`, `f${i}.txt`);
    const text = await readFile(path, 'utf8').catch(() => null);
    if (text !== null) found++;
    if (text !== `content ${i}\n`) wrong.push(path);
  }
  return { found, wrong };
}

/** What a commit does at the least, in plain Node: each file copied to a temporary name, renamed over. */
async function baseline(scratch, round) {
  const src = join(scratch, `src-${round}`);
  const dst = join(scratch, `dst-${round}`);
  for (let i = 0; i < FILES; i++) {
    const d = `d${Math.floor(i / PER_DIR)}`;
    if (i % PER_DIR === 0) {
      await mkdir(join(src, d), { recursive: true });
      await mkdir(join(dst, d), { recursive: true });
    }
    await writeFile(join(src, d, `f${i}.txt`), `content ${i}\n`);
  }
  const started = performance.now();
  for (const d of await readdir(src)) {
    for (const f of await readdir(join(src, d))) {
      await copyFile(join(src, d, f), join(dst, d, `.${f}.tmp`));
      await rename(join(dst, d, `.${f}.tmp`), join(dst, d, f));
    }
  }
  return performance.now() - started;
}

async function main() {
  const scratch = await mkdtemp(join(tmpdir(), 'af-bench-commit-'));
  const plane = await ControlPlane.open({ dataDir: join(scratch, 'data'), reapIntervalMs: 0 });
  const failures = [];
  const commits = [];
  const natives = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const repo = join(scratch, `repo-${round}`);
      await mkdir(repo);
      const codebase = await plane.linkCodebase({ path: repo });
      const sandbox = await plane.createSandbox({ codebaseId: codebase.id, preset: 'full-access' });
      await plane.startSandbox(sandbox.id);
      const wrote = await plane.run(sandbox.id, writer(), { timeoutMs: 120_000 });
      if (wrote.exitCode !== 0) failures.push(`round ${round}: the writer exited ${wrote.exitCode}`);
      const started = performance.now();
      const result = await plane.commit(sandbox.id);
      commits.push(performance.now() - started);
      await plane.destroySandbox(sandbox.id);
      await plane.deleteCodebase(codebase.id);
      const { found, wrong } = await check(repo);
      if (wrong.length > 0 || result.conflicts.length > 0) {
        failures.push(
          `round ${round}: ${found} of ${FILES} files, ${wrong.length} wrong, ${result.conflicts.length} conflicts`,
        );
      }
      natives.push(await baseline(scratch, round));
      console.log(`round ${round}: commit ${ms(commits.at(-1))}, plain copy + rename ${ms(natives.at(-1))}`);
    }
  } finally {
    await plane.close();
    await rm(scratch, { recursive: true, force: true });
  }
  const commit = median(commits);
  const native = median(natives);
  console.log(
    `\n${FILES} small files, ${ROUNDS} rounds, load ${loadavg()[0].toFixed(1)}:\n` +
      `  commit: median ${ms(commit)} (${((commit * 1000) / FILES).toFixed(0)} µs a file), ` +
      `min ${ms(Math.min(...commits))}, max ${ms(Math.max(...commits))}\n` +
      `  plain copy + rename in Node: median ${ms(native)} (${(commit / native).toFixed(1)}× that)`,
  );
  for (const failure of failures) console.log(`FAIL ${failure}`);
  process.exitCode = failures.length > 0 ? 1 : 0;
}

await main();
