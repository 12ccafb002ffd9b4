// Property check: the indexed, cached engine agrees with a slow reference that is the literal spec (evaluate
// every rule, sort matches by priority, type, specificity, order) on thousands of random rules and paths.
import picomatch from 'picomatch';
import { describe, expect, it } from 'vitest';
import { compileRules } from '../../src/index.js';
import type { Decision, Permission, RuleSet } from '../../src/index.js';

interface RawRule {
  pattern: string;
  permission: Permission;
  type?: 'glob' | 'directory' | 'file';
  priority?: number;
}

/** mulberry32: seeded so a failure reproduces. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ---- the reference: contract §1 and the README decisions, written as plainly as possible ----

const TYPE_ORDER = { file: 3, directory: 2, glob: 1 } as const;
const LEVEL = { none: 0, view: 1, read: 2, write: 3 } as const;

function refType(rule: RawRule): 'glob' | 'directory' | 'file' {
  if (rule.type !== undefined) return rule.type;
  if (/[*?[\]{}!]/.test(rule.pattern)) return 'glob';
  return rule.pattern.endsWith('/') ? 'directory' : 'file';
}

function refTarget(pattern: string): string {
  let p = ('/' + pattern).replace(/\/+/g, '/');
  if (p.length > 1 && p.endsWith('/')) p = p.slice(0, -1);
  return p;
}

const matchers = new Map<string, (s: string) => boolean>();
function pm(glob: string): (s: string) => boolean {
  let m = matchers.get(glob);
  if (m === undefined) {
    m = picomatch(glob, { dot: true });
    matchers.set(glob, m);
  }
  return m;
}

function refMatches(rule: RawRule, path: string): boolean {
  const type = refType(rule);
  if (type === 'file') return path === refTarget(rule.pattern);
  if (type === 'directory') {
    const dir = refTarget(rule.pattern);
    return dir === '/' || path === dir || path.startsWith(dir + '/');
  }
  if (path === '/') return false;
  let glob = rule.pattern.replace(/\/+/g, '/');
  if (glob.endsWith('/')) glob += '**';
  if (!glob.includes('/')) return pm(glob)(path.slice(path.lastIndexOf('/') + 1));
  const rel = glob.startsWith('/') ? glob.slice(1) : glob;
  const subject = path.slice(1);
  if (pm(rel)(subject)) return true;
  return rel.endsWith('/**') && !rel.startsWith('!') && rel !== '**' && pm(rel.slice(0, -3))(subject);
}

function refSpecificity(rule: RawRule): number {
  const type = refType(rule);
  let canonical = rule.pattern;
  if (type === 'file') canonical = refTarget(rule.pattern);
  else if (type === 'directory')
    canonical = refTarget(rule.pattern) === '/' ? '/' : refTarget(rule.pattern) + '/';
  else if (rule.pattern.includes('/') && !rule.pattern.startsWith('/') && !rule.pattern.startsWith('**')) {
    canonical = '/' + rule.pattern;
  }
  const m = /[*?[\]{}!]/.exec(canonical);
  return m === null ? canonical.length : m.index;
}

function refDecide(rules: readonly RawRule[], path: string): Decision {
  const matching = rules.map((rule, index) => ({ rule, index })).filter(({ rule }) => refMatches(rule, path));
  matching.sort(
    (a, b) =>
      (b.rule.priority ?? 0) - (a.rule.priority ?? 0) ||
      TYPE_ORDER[refType(b.rule)] - TYPE_ORDER[refType(a.rule)] ||
      refSpecificity(b.rule) - refSpecificity(a.rule) ||
      b.index - a.index,
  );
  const top = matching[0];
  return top === undefined
    ? { permission: 'none', ruleIndex: null }
    : { permission: top.rule.permission, ruleIndex: top.index };
}

// ---- random rules and paths over a small vocabulary, so rules and paths actually collide ----

const NAMES = [
  'a',
  'b',
  'src',
  'secrets',
  'lib',
  '.env',
  '.env.local',
  'x.key',
  'y.ts',
  'public.key',
  '.git',
  'node_modules',
];
const GLOBS = [
  '**/*',
  '**',
  '*',
  '/**',
  '*.key',
  '*.ts',
  '.env*',
  '*.env*',
  '!*.key',
  '*.{ts,key}',
  '[ab]',
  '/secrets/**',
  '**/secrets/**',
  '/src/**/*.ts',
  'src/*/',
  '/src/*/**',
  '/a/*',
  '/a/{b,lib}/**',
  '**/.git/**',
  '**/node_modules/**',
  '**/a/*.key',
  '*/b',
  '/a/b*/**',
  '**/lib',
  '/*.ts',
  '**/*.ts',
  'a/**/b',
  '/a/?',
];
const PERMS: Permission[] = ['none', 'view', 'read', 'write'];
const PRIORITIES = [undefined, undefined, 0, 1, 5, -1];

function makeRandom(seed: number): {
  rule: () => RawRule;
  path: () => string;
} {
  const random = prng(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
  const segs = (n: number): string => Array.from({ length: n }, () => pick(NAMES)).join('/');
  const path = (): string => {
    const depth = Math.floor(random() * 5);
    return depth === 0 ? '/' : `/${segs(depth)}`;
  };
  const rule = (): RawRule => {
    const kind = random();
    let r: RawRule;
    if (kind < 0.2)
      r = {
        pattern: (random() < 0.8 ? '/' : '') + segs(1 + Math.floor(random() * 3)),
        permission: pick(PERMS),
      };
    else if (kind < 0.4) {
      const d = random() < 0.1 ? '' : segs(1 + Math.floor(random() * 2));
      r = {
        pattern: (random() < 0.8 || d === '' ? '/' : '') + d + (d === '' ? '' : '/'),
        permission: pick(PERMS),
      };
    } else r = { pattern: pick(GLOBS), permission: pick(PERMS) };
    const priority = pick(PRIORITIES);
    if (priority !== undefined) r.priority = priority;
    if (random() < 0.05 && r.pattern !== '/') r.type = 'glob';
    return r;
  };
  return { rule, path };
}

/** All paths strictly below `dir`, up to `depth` more segments, over the vocabulary. */
function descendants(dir: string, depth: number): string[] {
  if (depth === 0) return [];
  const out: string[] = [];
  for (const name of NAMES) {
    const child = dir === '/' ? `/${name}` : `${dir}/${name}`;
    out.push(child, ...descendants(child, depth - 1));
  }
  return out;
}

describe('engine vs reference', () => {
  it('decides like the literal spec on random rule sets and paths, cached or not', () => {
    let compared = 0;
    for (let set = 0; set < 300; set++) {
      const { rule, path } = makeRandom(1000 + set);
      const rules = Array.from({ length: 1 + Math.floor(set % 12) }, rule);
      const cached = compileRules(rules);
      const tiny = compileRules(rules, { cacheSize: 4 }); // rotates generations constantly
      const uncached = compileRules(rules, { cacheSize: 0 });
      for (let i = 0; i < 40; i++) {
        const p = path();
        const expected = refDecide(rules, p);
        const context = `rules=${JSON.stringify(rules)} path=${p}`;
        expect(cached.decide(p), context).toEqual(expected);
        expect(cached.decide(p), `${context} (cached)`).toEqual(expected);
        expect(tiny.decide(p), `${context} (tiny cache)`).toEqual(expected);
        expect(uncached.decide(p), `${context} (no cache)`).toEqual(expected);
        expect(uncached.decideUncached(p), `${context} (decideUncached)`).toEqual(expected);
        compared++;
      }
    }
    expect(compared).toBe(12_000);
    // 12,000 paths x 5 decisions against a reference matcher: CPU-bound, and CI shares two cores with
    // real mounts and sandboxes; the seeds are fixed, so a longer budget cannot hide a flaky result.
  }, 60_000);

  it('never calls a directory untraversable when something inside it is visible', () => {
    for (let set = 0; set < 150; set++) {
      const { rule, path } = makeRandom(5000 + set);
      const rules = Array.from({ length: 1 + (set % 8) }, rule);
      const rs: RuleSet = compileRules(rules);
      for (let i = 0; i < 4; i++) {
        const dir = path();
        const visibleInside = descendants(dir, 2).some((p) => LEVEL[refDecide(rules, p).permission] >= 1);
        const ownVisible = LEVEL[refDecide(rules, dir).permission] >= 1;
        if (visibleInside || ownVisible) {
          expect(rs.isTraversable(dir), `rules=${JSON.stringify(rules)} dir=${dir}`).toBe(true);
        }
      }
    }
  });

  it('calls a subtree uniform only when every path below the directory resolves to that permission', () => {
    let uniform = 0;
    for (let set = 0; set < 300; set++) {
      const { rule, path } = makeRandom(9000 + set);
      const rules = Array.from({ length: 1 + (set % 6) }, rule);
      const rs: RuleSet = compileRules(rules);
      for (let i = 0; i < 4; i++) {
        const dir = path();
        const answer = rs.uniformBelow(dir);
        if (answer === null) continue;
        uniform++;
        for (const p of descendants(dir, 2)) {
          expect(refDecide(rules, p).permission, `rules=${JSON.stringify(rules)} dir=${dir} path=${p}`).toBe(
            answer,
          );
        }
      }
    }
    // The property must be exercised, not vacuously true: a good share of random subtrees are uniform.
    expect(uniform).toBeGreaterThan(100);
  });

  it('clearCache does not change answers', () => {
    const { rule, path } = makeRandom(42);
    const rules = Array.from({ length: 10 }, rule);
    const rs = compileRules(rules);
    const paths = Array.from({ length: 500 }, path);
    const before = paths.map((p) => [rs.decide(p), rs.isTraversable(p)]);
    rs.clearCache();
    expect(paths.map((p) => [rs.decide(p), rs.isTraversable(p)])).toEqual(before);
  });
});
