// The HTTP API's pure parts: enum spellings both ways, durations, label filters, codebase paging, the
// start admission limit, and the bearer check.
import { describe, expect, it } from 'vitest';
import { BearerAuth } from '../src/http/auth.js';
import { pageCodebases } from '../src/http/backend.js';
import { ConcurrencyLimit } from '../src/http/limit.js';
import {
  COMMIT_MODE,
  PATTERN_TYPE,
  PERMISSION,
  RUNTIME_TYPE,
  SANDBOX_STATUS,
  SESSION_STATUS,
  formatDuration,
  labelsFromQuery,
  parseDuration,
  rulesFromWire,
} from '../src/http/mapping.js';
import type { CodebaseInfo } from '../src/codebases/types.js';

describe('enums', () => {
  it('format the original spellings and parse them and the short forms', () => {
    expect(PERMISSION.format('read')).toBe('PERMISSION_READ');
    expect(PATTERN_TYPE.format('directory')).toBe('PATTERN_TYPE_DIRECTORY');
    expect(SANDBOX_STATUS.format('RUNNING')).toBe('SANDBOX_STATUS_RUNNING');
    expect(RUNTIME_TYPE.format('bwrap')).toBe('RUNTIME_TYPE_BWRAP');
    expect(SESSION_STATUS.format('active')).toBe('SESSION_STATUS_ACTIVE');
    for (const [input, value] of [
      ['PERMISSION_WRITE', 'write'],
      ['write', 'write'],
      ['PERMISSION_NONE', 'none'],
    ] as const) {
      expect(PERMISSION.parse(input)).toBe(value);
    }
    expect(SANDBOX_STATUS.parse('stopped')).toBe('STOPPED');
    expect(SANDBOX_STATUS.parse('SANDBOX_STATUS_ERROR')).toBe('ERROR');
    expect(RUNTIME_TYPE.parse('RUNTIME_TYPE_DOCKER')).toBe('docker');
    expect(PATTERN_TYPE.parse('PATTERN_TYPE_UNSPECIFIED')).toBeUndefined();
    expect(COMMIT_MODE.parse('COMMIT_MODE_LAST_WRITER_WINS')).toBe('last-writer-wins');
    expect(COMMIT_MODE.parse('detect-conflicts')).toBe('detect-conflicts');
  });

  it('refuse other spellings with the accepted list', () => {
    expect(() => PERMISSION.parse('Read')).toThrow(/PERMISSION_READ.*read/);
    expect(() => PERMISSION.parse('PERMISSION_UNSPECIFIED')).toThrow(/invalid permission/);
    expect(() => SANDBOX_STATUS.parse('RUNNING')).toThrow(/invalid sandbox_status/);
  });

  it('convert rules, keeping absent type and priority absent', () => {
    expect(
      rulesFromWire([
        { pattern: '**', permission: 'PERMISSION_READ' },
        { pattern: '/a/', type: 'directory', permission: 'write', priority: 5 },
        { pattern: '*.md', type: 'PATTERN_TYPE_UNSPECIFIED', permission: 'view' },
      ]),
    ).toEqual([
      { pattern: '**', permission: 'read' },
      { pattern: '/a/', type: 'directory', permission: 'write', priority: 5 },
      { pattern: '*.md', permission: 'view' },
    ]);
  });
});

describe('durations', () => {
  it('accept seconds as numbers and protobuf JSON strings', () => {
    expect(parseDuration('t', 30)).toBe(30);
    expect(parseDuration('t', 0.25)).toBe(0.25);
    expect(parseDuration('t', '30s')).toBe(30);
    expect(parseDuration('t', '1.5s')).toBe(1.5);
    expect(parseDuration('t', '0.000000001s')).toBe(1e-9);
    for (const bad of ['30', '1m', '-1s', 's', '0s', '1.5 s', 0, -2, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => parseDuration('timeout', bad), String(bad)).toThrow(/timeout must be/);
    }
  });

  it('format milliseconds as protobuf JSON', () => {
    expect(formatDuration(12)).toBe('0.012s');
    expect(formatDuration(1500)).toBe('1.5s');
    expect(formatDuration(0.0004)).toBe('0s');
    expect(formatDuration(33.659669)).toBe('0.03366s');
  });
});

describe('label filters', () => {
  it('parse comma lists and repeats, key:value or key=value', () => {
    expect(labelsFromQuery([])).toBeUndefined();
    expect(labelsFromQuery(['a:1,b=2', 'c:x:y'])).toEqual({ a: '1', b: '2', c: 'x:y' });
    expect(labelsFromQuery(['a:'])).toEqual({ a: '' });
    expect(() => labelsFromQuery([':v'])).toThrow(/key:value/);
    expect(() => labelsFromQuery(['novalue'])).toThrow(/key:value/);
  });
});

describe('codebase paging', () => {
  const cb = (n: number, owner: string | null): CodebaseInfo => ({
    id: `cb_${String(n).padStart(8, '0')}-0000-4000-8000-000000000000`,
    name: `c${n}`,
    ownerId: owner,
    kind: 'stored',
    path: '/x',
    fileCount: 0,
    sizeBytes: 0,
    createdAt: new Date(1_000 + Math.floor(n / 2)).toISOString(), // pairs share a millisecond
    updatedAt: new Date(1_000).toISOString(),
  });
  const all = [0, 1, 2, 3, 4, 5, 6].map((n) => cb(n, n % 2 === 0 ? 'even' : 'odd'));

  it('walks every item once, in creation order, filtered by owner', () => {
    const seen: string[] = [];
    let token: string | undefined;
    do {
      const page = pageCodebases(all, { pageSize: 2, ...(token === undefined ? {} : { pageToken: token }) });
      seen.push(...page.items.map((c) => c.name));
      token = page.nextPageToken ?? undefined;
    } while (token !== undefined);
    expect(seen).toEqual(['c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6']);
    expect(pageCodebases(all, { ownerId: 'odd' }).items.map((c) => c.name)).toEqual(['c1', 'c3', 'c5']);
    expect(pageCodebases(all, { pageSize: 7 }).nextPageToken).toBeNull();
    expect(() => pageCodebases(all, { pageToken: 'nope' })).toThrow(/page token/);
  });
});

describe('ConcurrencyLimit', () => {
  it('runs at most `limit` tasks at once, in arrival order, releasing on failure', async () => {
    const limit = new ConcurrencyLimit(2);
    let active = 0;
    let peak = 0;
    const order: number[] = [];
    const task = (n: number, fail = false) =>
      limit.run(async () => {
        active += 1;
        peak = Math.max(peak, active);
        order.push(n);
        await new Promise((resolve) => setTimeout(resolve, 5));
        active -= 1;
        if (fail) throw new Error(`task ${n}`);
        return n;
      });
    const results = await Promise.allSettled([
      task(1),
      task(2, true),
      task(3),
      task(4),
      task(5, true),
      task(6),
    ]);
    expect(peak).toBe(2);
    expect(order).toEqual([1, 2, 3, 4, 5, 6]);
    expect(results.map((r) => r.status)).toEqual([
      'fulfilled',
      'rejected',
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
    ]);
    expect(limit.running).toBe(0);
    expect(limit.waiting).toBe(0);
    expect(() => new ConcurrencyLimit(0)).toThrow(RangeError);
  });
});

describe('BearerAuth', () => {
  it('accepts exactly the token, in a Bearer header', () => {
    const token = 'x'.repeat(40);
    const auth = new BearerAuth(token);
    expect(auth.check(`Bearer ${token}`)).toBe(true);
    expect(auth.check(`bearer  ${token} `)).toBe(true);
    for (const header of [
      undefined,
      '',
      token,
      `Bearer ${token}x`,
      `Bearer ${token.slice(1)}`,
      `Basic ${token}`,
      'Bearer',
    ]) {
      expect(auth.check(header), String(header)).toBe(false);
    }
  });
});
