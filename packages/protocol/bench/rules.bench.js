// Permission engine benchmark: 200 realistic rules, 1M mostly distinct paths (uncached) and 1M decisions over a
// 50k-path working set (cached). Run after `pnpm exec tsc -b`. Exits 1 if the uncached run exceeds the budget.
import { performance } from 'node:perf_hooks';
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

const random = prng(SEED);
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

function time(ruleSet, paths) {
  const counts = { none: 0, view: 0, read: 0, write: 0 };
  const start = performance.now();
  for (const p of paths) counts[ruleSet.permissionOf(p)]++;
  return { seconds: (performance.now() - start) / 1000, counts };
}

const rules = makeRules();
// JSON round trip: flat, never-hashed strings, like paths arriving from the FUSE binding or the wire.
const uncachedPaths = JSON.parse(JSON.stringify(makePaths(DECISIONS)));
const workingSet = makePaths(WORKING_SET);
const cachedPaths = makePaths(DECISIONS, workingSet);

// Warm the JIT on a separate rule set so the timed one starts with empty caches.
time(compileRules(rules), makePaths(100_000));

const uncached = time(compileRules(rules), uncachedPaths);
const warm = compileRules(rules);
time(warm, workingSet);
const cached = time(warm, cachedPaths);

const ns = (r) => ((r.seconds * 1e9) / DECISIONS).toFixed(0);
console.log(`rules:                 ${rules.length}`);
console.log(`distinct paths:        ${new Set(uncachedPaths).size} of ${DECISIONS}`);
console.log(
  `uncached:              ${DECISIONS} decisions in ${uncached.seconds.toFixed(3)} s (${ns(uncached)} ns/decision)`,
);
console.log(
  `cached (50k set):      ${DECISIONS} decisions in ${cached.seconds.toFixed(3)} s (${ns(cached)} ns/decision)`,
);
console.log(`outcomes (uncached):   ${JSON.stringify(uncached.counts)}`);
if (uncached.seconds > BUDGET_SECONDS) {
  console.error(`FAIL: uncached run took ${uncached.seconds.toFixed(3)} s, budget ${BUDGET_SECONDS} s`);
  process.exitCode = 1;
}
