// Attack: tell whether a hidden file exists without ever seeing it. (1) By timing: a name that does not
// exist was answered with a cached negative entry (later stats never reach the worker, ~4 µs), a hidden
// one with an error reply the kernel does not keep (every stat a round trip to the worker, ~100 µs).
// (2) By a directory's size: the host's st_size of a directory counts the bytes of every entry, hidden
// ones too (12288 for a directory of hidden files, 4096 for an empty one). Defence: a hidden name is
// answered exactly as an absent one (same negative entry, same timeout, taken back by rule changes), and
// every directory reports one fixed size. The timing is asserted through its mechanism, the requests
// that reach the worker, which a noisy machine does not blur.
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';
import type { MountedFixture } from '../helpers/worker-fixture.js';

const RULES = [
  { pattern: '**', permission: 'read' as const },
  { pattern: '/conf/prod.key', permission: 'none' as const, priority: 100 },
  { pattern: '/vault/*.key', permission: 'none' as const, priority: 100 },
];

/** LOOKUPs the worker served while `cmd` ran in the sandbox. */
async function lookupsDuring(f: MountedFixture, cmd: string): Promise<number> {
  const before = (await f.worker.client.request('stats', {})).ops.lookup?.count ?? 0;
  const r = await f.sandbox(cmd);
  expect(r.code).toBe(0);
  return ((await f.worker.client.request('stats', {})).ops.lookup?.count ?? 0) - before;
}

describe("a hidden file's existence", () => {
  useMountHygiene();

  it('is not told by caching: a hidden name reaches the worker once, like an absent one', async () => {
    const f = await mountFixture({
      tree: { 'conf/app.toml': 'x\n', 'conf/prod.key': 'secret\n' },
      rules: RULES,
      warmupEntries: 0,
    });
    await f.sandbox('stat conf/app.toml');
    const stat20 = (name: string): string =>
      `for i in $(seq 20); do stat conf/${name} >/dev/null 2>&1 && exit 9; done; true`;
    const absent = await lookupsDuring(f, stat20('nope.key'));
    const hidden = await lookupsDuring(f, stat20('prod.key'));
    expect(absent).toBe(1);
    expect(hidden).toBe(absent);
    // The one request that reached the worker is still audited.
    await f.waitAudit((e) => e.path === '/conf/prod.key' && e.decision === 'deny');
    await new Promise((r) => setTimeout(r, 200));
    expect(f.audit.filter((e) => e.path === '/conf/prod.key')).toHaveLength(1);
  });

  it('a rule that reveals the name takes its cached negative entry back at once', async () => {
    // At the root: no directory above it whose invalidation would drop the names it holds, so only
    // naming each negative entry takes it back.
    const f = await mountFixture({
      tree: { 'prod.key': 'secret\n', go: '' },
      rules: [
        { pattern: '**', permission: 'read' },
        { pattern: '/prod.key', permission: 'none', priority: 100 },
        { pattern: '/go', permission: 'none', priority: 100 },
      ],
      warmupEntries: 0,
    });
    // A shell that stats the hidden name (its negative entry now cached), waits until the new rules show
    // go (revealed together with it), and reads it.
    const run = f.sandbox(
      'stat prod.key 2>/dev/null; echo first=$?; ' +
        'for i in $(seq 200); do [ -e go ] && break; sleep 0.05; done; cat prod.key',
    );
    await f.waitAudit((e) => e.path === '/prod.key');
    await f.worker.client.request('setRules', { rules: [{ pattern: '**', permission: 'read' }] });
    const r = await run;
    expect(r.stdout).toBe('first=1\nsecret\n');
  });

  it('is not told by the size of its directory', async () => {
    const names = Object.fromEntries(
      Array.from({ length: 200 }, (_, i) => [`vault/${'k'.repeat(100)}${i}.key`, 's\n']),
    );
    const f = await mountFixture({
      tree: { ...names, 'empty/.keep': '' },
      rules: [...RULES, { pattern: '/empty/.keep', permission: 'none', priority: 100 }],
      warmupEntries: 0,
    });
    const r = await f.sandbox('ls -A vault empty && stat -c "%s %b %h" vault empty');
    expect(r.code).toBe(0);
    const [vault, empty] = r.stdout.trim().split('\n').slice(-2);
    expect(r.stdout).not.toContain('.key');
    expect(vault).toBe(empty);
  });
});
