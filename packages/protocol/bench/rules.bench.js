// Permission engine benchmark: 200 realistic rules, 1M mostly distinct paths (uncached) and 1M decisions over a
// 50k-path working set (cached). Run after `pnpm exec tsc -b`. Exits 1 if the uncached run exceeds the budget.
import console from 'node:console';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { compileRules } from '../dist/index.js';

const BUDGET_SECONDS = 2;
const DECISIONS = 1_000_000;
const WORKING_SET = 50_000;
const SEED = 0x5eed;

/** mulberry32: tiny seeded PRNG so every run decides the same paths. */
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Reassigned only to replay the uncached path stream when counting distinct paths afterwards.
let random = prng(SEED);
const pick = (list) => list[Math.floor(random() * list.length)];
const int = (n) => Math.floor(random() * n);

const DIRS = [
  'src',
  'lib',
  'test',
  'tests',
  'docs',
  'node_modules',
  '.git',
  'secrets',
  'build',
  'dist',
  'output',
  'tmp',
  'config',
  'app',
  'pkg',
  'internal',
  'vendor',
  'assets',
  'scripts',
  'utils',
  'components',
  'api',
  'server',
  'client',
  'models',
  'views',
  'public',
  'private',
  'fixtures',
  'data',
  'logs',
  'cache',
  '.github',
  'deploy',
  'infra',
  'keys',
  'certs',
  'examples',
  'tools',
  'core',
];
const NAMES = [
  'index',
  'main',
  'util',
  'README',
  'config',
  'server',
  'client',
  'app',
  'types',
  'helpers',
  'id_rsa',
  'db',
  'schema',
  'routes',
  'package',
];
const EXTS = [
  '.ts',
  '.js',
  '.json',
  '.md',
  '.key',
  '.pem',
  '.yaml',
  '.log',
  '.py',
  '.go',
  '.map',
  '.min.js',
  '.d.ts',
  '.txt',
  '',
];
const SPECIAL_FILES = [
  '.env',
  '.env.local',
  '.env.production',
  'credentials.json',
  'credentials',
  '.npmrc',
  'Dockerfile',
];
const PERMS = ['none', 'view', 'read', 'write'];
const PRIORITIES = [0, 0, 0, 0, 10, 50, 100];

const dirName = () => (random() < 0.7 ? pick(DIRS) : `${pick(DIRS)}${int(50)}`);
const fileName = () =>
  random() < 0.05 ? pick(SPECIAL_FILES) : `${pick(NAMES)}${random() < 0.8 ? int(2000) : ''}${pick(EXTS)}`;
const dirPath = (depth) => Array.from({ length: depth }, dirName).join('/');

function makeRules() {
  const rules = [{ pattern: '**/*', permission: 'read' }];
  const add = (pattern, extra = {}) =>
    rules.push({ pattern, permission: pick(PERMS), priority: pick(PRIORITIES), ...extra });
  for (let i = 0; i < 40; i++) add(`/${dirPath(1 + int(3))}/${fileName()}`); // file rules
  for (let i = 0; i < 40; i++) add(`/${dirPath(1 + int(3))}/`); // directory rules
  for (let i = 0; i < 50; i++) {
    const base = dirPath(1 + int(2));
    add(
      pick([
        `/${base}/**`,
        `/${base}/*${pick(EXTS) || '.ts'}`,
        `/${base}/**/*${pick(EXTS) || '.json'}`,
        `/${base}/*/`,
      ]),
    );
  }
  const basenames = [
    '*.key',
    '*.pem',
    '.env*',
    '*.log',
    'credentials*',
    '*.map',
    '*.min.js',
    'id_rsa*',
    '*.d.ts',
    '*.yaml',
  ];
  for (let i = 0; i < 30; i++)
    add(i < basenames.length ? basenames[i] : `*${int(100)}${pick(EXTS) || '.txt'}`);
  for (let i = 0; i < 30; i++) add(`**/${dirName()}/**`);
  for (let i = 0; i < 9; i++)
    add(pick([`**/*.${pick(['snap', 'orig', 'bak'])}`, `**/${pick(DIRS)}/*.js`, `**/.env*`]));
  return rules;
}

function makePaths(count, vocabulary) {
  return Array.from({ length: count }, () => {
    if (vocabulary !== undefined) return pick(vocabulary);
    const depth = 1 + int(8);
    return depth === 1 ? `/${fileName()}` : `/${dirPath(depth - 1)}/${fileName()}`;
  });
}

/** Decides every path through the public, memoised API; times only the decisions. */
function time(
  ruleSet,
  paths,
  totals = { seconds: 0, cpuSeconds: 0, counts: { none: 0, view: 0, read: 0, write: 0 } },
) {
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (const p of paths) totals.counts[ruleSet.permissionOf(p)]++;
  totals.seconds += (performance.now() - start) / 1000;
  const { user, system } = process.cpuUsage(cpu);
  totals.cpuSeconds += (user + system) / 1e6;
  return totals;
}

/**
 * The uncached run, on paths generated in chunks of 100k (generation untimed). Holding all 1M strings at
 * once would make every major GC mark the benchmark's own heap, which a FUSE worker does not have.
 * JSON round trip: flat, never-hashed strings, like paths arriving from the FUSE binding or the wire.
 */
function timeUncached(ruleSet) {
  const chunk = 100_000;
  const seed = SEED + 1;
  random = prng(seed);
  let totals;
  for (let done = 0; done < DECISIONS; done += chunk) {
    totals = time(ruleSet, JSON.parse(JSON.stringify(makePaths(chunk))), totals);
  }
  // Replay the same stream, untimed, to report how distinct it was.
  random = prng(seed);
  const distinct = new Set();
  for (let done = 0; done < DECISIONS; done += chunk) for (const p of makePaths(chunk)) distinct.add(p);
  return { ...totals, distinct: distinct.size };
}

const rules = makeRules();

// Warm the JIT on a separate rule set so the timed ones start with empty caches.
time(compileRules(rules), makePaths(100_000));

const uncached = timeUncached(compileRules(rules));
const workingSet = JSON.parse(JSON.stringify(makePaths(WORKING_SET)));
const cachedPaths = makePaths(DECISIONS, workingSet);
const warm = compileRules(rules);
time(warm, workingSet);
const cached = time(warm, cachedPaths);

const ns = (r) => ((r.seconds * 1e9) / DECISIONS).toFixed(0);
// CPU time is printed too: on a shared machine it tells how much of the wall time was spent waiting for a core.
const line = (r) =>
  `${DECISIONS} decisions in ${r.seconds.toFixed(3)} s (${ns(r)} ns/decision; CPU ${r.cpuSeconds.toFixed(3)} s)`;
console.log(`rules:                 ${rules.length}`);
console.log(`distinct paths:        ${uncached.distinct} of ${DECISIONS} (uncached run)`);
console.log(`uncached:              ${line(uncached)}`);
console.log(`cached (50k set):      ${line(cached)}`);
console.log(`outcomes (uncached):   ${JSON.stringify(uncached.counts)}`);
if (uncached.seconds > BUDGET_SECONDS) {
  console.error(`FAIL: uncached run took ${uncached.seconds.toFixed(3)} s, budget ${BUDGET_SECONDS} s`);
  process.exitCode = 1;
}
