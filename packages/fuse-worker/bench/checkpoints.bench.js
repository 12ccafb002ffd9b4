// Checkpoint and restore benchmark, through the Delta API (no FUSE, no root): a delta with 10,000 changed
// files, checkpointed and restored, and reads through a stack of 8 frozen layers against one layer.
// Medians of several rounds, each beside its target and a native operation measured in the same run.
// Run with `pnpm bench:checkpoints` (builds first). See bench/README.md.
//
// Environment: BENCH_DIR (parent of the temp trees; default /var/tmp), BENCH_ROUNDS (default 5),
// BENCH_FILES (changed files per delta, default 10,000, in 100 directories), BENCH_ONLY (comma-separated
// phases: checkpoint, restore, read, compact; `fork` is control's fork.bench.js; default all).
import console from 'node:console';
import { execFileSync } from 'node:child_process';
import { constants } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import process from 'node:process';
import { compactStack } from '../dist/delta/compact.js';
import { Delta } from '../dist/delta/delta.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const FILES = Number(process.env.BENCH_FILES ?? 10_000);
const DIRS = 100;
const LAYERS = 8;
const READ_FILES = 1000;
const root = await mkdtemp(join(process.env.BENCH_DIR ?? '/var/tmp', 'af-bench-layers-'));
const now = () => process.hrtime.bigint();
const ms = (t0) => Number(now() - t0) / 1e6;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
let seq = 0;
const ONLY = process.env.BENCH_ONLY?.split(',').map((s) => s.trim());
const only = (phase) => ONLY === undefined || ONLY.includes(phase);

// The codebase: 100 directories x 10 files of 2 KB (what the reads go through).
const lower = join(root, 'lower');
for (let d = 0; d < DIRS; d++) {
  await mkdir(join(lower, `d${d}`), { recursive: true });
  for (let f = 0; f < READ_FILES / DIRS; f++)
    await writeFile(join(lower, `d${d}`, `c${f}`), 'c'.repeat(2048));
}

async function openDelta(frozen) {
  const deltaDir = join(root, `delta${seq++}`);
  await mkdir(deltaDir);
  return { delta: await Delta.open({ lowerDir: lower, deltaDir, frozen }), deltaDir };
}

/** `count` new files of 100 bytes through the delta, in 100 directories (created first when missing). */
async function fill(delta, count, tag) {
  for (let d = 0; d < DIRS; d++)
    if ((await delta.lookup(`/d${d}/${tag}`)) === null) await delta.mkdir(`/d${d}/${tag}`, 0o755);
  for (let i = 0; i < count; i++) {
    const fh = await delta.create(`/d${i % DIRS}/${tag}/f${i}`, 0o644, constants.O_WRONLY);
    await fh.writeFile('x'.repeat(100));
    await fh.close();
  }
}

/** A 10,000-file tree written natively (for the native lines). */
/** Milliseconds to look up, open and read each of `paths` through `delta`. */
async function readAll(delta, paths) {
  const t0 = now();
  for (const p of paths) {
    if ((await delta.lookup(p)) === null) throw new Error(`missing ${p}`);
    const fh = await delta.openForRead(p);
    await fh.readFile();
    await fh.close();
  }
  return ms(t0);
}

async function nativeTree(dir) {
  for (let d = 0; d < DIRS; d++) await mkdir(join(dir, `d${d}`), { recursive: true });
  for (let i = 0; i < FILES; i++) await writeFile(join(dir, `d${i % DIRS}`, `f${i}`), 'x'.repeat(100));
}

const sync = () => execFileSync('sync');
const results = [];
function line(name, values, target, native, nativeName) {
  const p50 = median(values);
  const row = { name, p50, target, native: native === undefined ? undefined : median(native), nativeName };
  results.push(row);
  const targetText =
    target === undefined ? '' : ` (target ≤ ${target} ms: ${p50 <= target ? 'met' : 'MISSED'})`;
  const nativeText =
    native === undefined
      ? ''
      : `; ${nativeName} ${row.native.toFixed(2)} ms, ratio ${(p50 / row.native).toFixed(2)}x`;
  console.log(`${name.padEnd(46)} p50 ${p50.toFixed(2).padStart(8)} ms${targetText}${nativeText}`);
}

// 1. Checkpoint of a writable layer of FILES changed files, right after writing them and once written out.
if (only('checkpoint')) {
  const fresh = [];
  const settled = [];
  const mv = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (const after of ['fresh', 'settled']) {
      const { delta } = await openDelta();
      await fill(delta, FILES, 'w');
      if (after === 'settled') sync();
      const t0 = now();
      await delta.checkpoint({ layerDir: join(root, `cp${seq++}`) });
      (after === 'fresh' ? fresh : settled).push(ms(t0));
      await delta.close();
    }
    const tree = join(root, `native${seq++}`);
    await nativeTree(tree);
    const t0 = now();
    await rename(tree, `${tree}.moved`);
    mv.push(ms(t0));
  }
  line(`checkpoint, ${FILES} files just written`, fresh, 5, mv, 'mv of the upper dir');
  line(`checkpoint, ${FILES} files written out (sync)`, settled, 5, mv, 'mv of the upper dir');
}

// 2. Restore dropping a writable layer of FILES files; 3. restore to an earlier checkpoint.
if (only('restore')) {
  const drop = [];
  const back = [];
  const rmrf = [];
  for (let r = 0; r < ROUNDS; r++) {
    {
      const { delta } = await openDelta();
      await fill(delta, FILES, 'w');
      sync();
      const t0 = now();
      await delta.restore({ frozen: [] });
      drop.push(ms(t0));
      await delta.close(); // waits for the trash's removal
    }
    {
      const { delta } = await openDelta();
      await fill(delta, FILES, 'a');
      const l1 = join(root, `cp${seq++}`);
      await delta.checkpoint({ layerDir: l1 });
      await fill(delta, FILES, 'b');
      await delta.checkpoint({ layerDir: join(root, `cp${seq++}`) });
      await fill(delta, FILES / 10, 'c');
      sync();
      const t0 = now();
      await delta.restore({ frozen: [l1] });
      back.push(ms(t0));
      await delta.close();
    }
    const tree = join(root, `native${seq++}`);
    await nativeTree(tree);
    sync();
    const t0 = now();
    execFileSync('rm', ['-rf', tree]);
    rmrf.push(ms(t0));
  }
  line(`restore dropping ${FILES} writable files`, drop, 50, rmrf, 'rm -rf of the tree');
  line('restore to an earlier checkpoint (2 -> 1 layers)', back, 50, rmrf, 'rm -rf of the tree');
}

// 4. lookup + read of 1,000 codebase files and 100 files of the lowest layer through 8 frozen layers
// (each holding 1,000 files of its own and whiting out one codebase file), against one layer holding the same.
let ratio;
if (only('read')) {
  const stacked = await openDelta();
  const layerDirs = [];
  for (let k = 0; k < LAYERS; k++) {
    await fill(stacked.delta, READ_FILES, `l${k}`);
    await stacked.delta.unlink(`/d${k}/c9`);
    const dir = join(root, `stack${k}`);
    await stacked.delta.checkpoint({ layerDir: dir });
    layerDirs.push(dir);
  }
  const flat = await openDelta();
  for (let k = 0; k < LAYERS; k++) {
    await fill(flat.delta, READ_FILES, `l${k}`);
    await flat.delta.unlink(`/d${k}/c9`);
  }
  const paths = [];
  for (let i = 0; i < READ_FILES; i++)
    if (!(i % 10 === 9 && Math.floor(i / 10) < LAYERS)) paths.push(`/d${Math.floor(i / 10)}/c${i % 10}`);
  for (let i = 0; i < 100; i++) paths.push(`/d${i % DIRS}/l0/f${i}`);
  const through8 = [];
  const through1 = [];
  const nativeRead = [];
  for (let r = 0; r < ROUNDS + 1; r++) {
    const a = await readAll(stacked.delta, paths);
    const b = await readAll(flat.delta, paths);
    const t0 = now();
    for (const p of paths.slice(0, READ_FILES - LAYERS)) await readFile(join(lower, p));
    const c = ms(t0);
    if (r === 0) continue; // warm-up
    through8.push(a);
    through1.push(b);
    nativeRead.push(c);
  }
  line(`lookup+read of ${paths.length} files, 8 frozen layers`, through8, undefined, through1, 'one layer');
  ratio = median(through8) / median(through1);
  console.log(
    `  ratio 8 layers / 1 layer: ${ratio.toFixed(2)}x (target ≤ 1.1x: ${ratio <= 1.1 ? 'met' : 'MISSED'})`,
  );
  console.log(
    `  one layer ${median(through1).toFixed(2)} ms vs native readFile of the codebase files ${median(nativeRead).toFixed(2)} ms`,
  );
  await stacked.delta.close();
  await flat.delta.close();
}

// 5. Compaction: a stack of 8 frozen layers of 1,000 files each folded pairwise into one (7 folds), and
// lookup + read of 1,100 files through it before and after, on the same delta.
if (only('compact')) {
  const { delta } = await openDelta();
  let stack = [];
  for (let k = 0; k < LAYERS; k++) {
    await fill(delta, READ_FILES, `l${k}`);
    const dir = join(root, `cstack${k}`);
    await delta.checkpoint({ layerDir: dir });
    stack.push(dir);
  }
  const paths = [];
  for (let i = 0; i < READ_FILES; i++) paths.push(`/d${Math.floor(i / 10)}/c${i % 10}`);
  for (let i = 0; i < 100; i++) paths.push(`/d${i % DIRS}/l0/f${i}`);
  const rounds = async () => {
    const out = [];
    for (let r = 0; r < ROUNDS + 1; r++) out.push(await readAll(delta, paths));
    return out.slice(1); // warm-up
  };
  const before = await rounds();
  const folds = [];
  for (let n = 0; stack.length > 1; n++) {
    const merged = join(root, `cmerged${n}`);
    const t0 = now();
    await compactStack(delta, { from: [stack[0], stack[1]], to: merged });
    folds.push(ms(t0));
    stack = [merged, ...stack.slice(2)];
  }
  const after = await rounds();
  line(`fold of two layers (1,000 to 7,000 files below)`, folds);
  line(`lookup+read of ${paths.length} files, 1 merged layer`, after, undefined, before, '8 layers before');
  await delta.close();
}

if (process.env.BENCH_JSON)
  await writeFile(process.env.BENCH_JSON, JSON.stringify({ results, ratio }, null, 2));
await rm(root, { recursive: true, force: true });
