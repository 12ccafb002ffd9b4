// Attack: get a LOOKUP answered by the binding (nativeLookups: misses in directories only the sandbox made
// are answered in C, fuse-native/native/fast-entries.c) where the worker would have decided otherwise:
// after a rule change that hides names in the directory, after moving the directory under such a rule,
// in a directory whose rules hide some names from the start, with a name that is not UTF-8. Each time the
// worker's answer is the one that counts: a hidden name's LOOKUP is refused and audited (a `deny` record),
// a name that is not UTF-8 is EINVAL. Defences: a rule change revokes every mark before it applies
// (FsCore.setRules), a RENAME revokes them at its decode and reply (fast-entries.c), a directory is marked
// only when every path below it is `write` (RuleSet.uniformBelow), and the binding takes plain ASCII names
// only.
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, type MountedFixture } from '../helpers/worker-fixture.js';
import { nativeCount, ruleChangeRace, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const OPEN = WRITABLE_OUTPUT;
// A missing name is refused (and audited) where nothing below it could be visible either: a subtree rule.
const HIDE_SECRETS = [...OPEN, { pattern: '**/secrets/**', permission: 'none' as const, priority: 100 }];
const HIDE_SECRETS_IN_LOCKED = [
  ...OPEN,
  { pattern: '/output/locked/**/secrets/**', permission: 'none' as const, priority: 100 },
];

function nativeLookupCount(f: MountedFixture): Promise<number> {
  return nativeCount(f, 'lookup-native');
}

/** Makes `dir` (new) with 20 files, checking a missing name before each create: marks it, as `tar -x` would. */
async function fill(f: MountedFixture, dir: string): Promise<void> {
  const r = await f.sandbox(
    `mkdir -p ${dir} && for i in $(seq 20); do test -e ${dir}/f$i && exit 9; echo x > ${dir}/f$i; done`,
  );
  expect(r).toMatchObject({ code: 0, stderr: '' });
  expect(await nativeLookupCount(f)).toBeGreaterThan(10);
}

/** The sandbox looks `path` up (missing): the worker must refuse it as hidden and audit the refusal. */
async function expectHiddenAndAudited(f: MountedFixture, path: string): Promise<void> {
  const before = await nativeLookupCount(f);
  expect((await f.sandbox(`test -e ${path}; echo $?`)).stdout).toBe('1\n');
  await f.waitAudit((e) => e.path === `/${path}` && e.decision === 'deny' && e.op === 'lookup', 5000);
  expect(await nativeLookupCount(f)).toBe(before);
}

describe('LOOKUPs answered in the binding: the worker keeps deciding what the rules make non-trivial', () => {
  useMountHygiene();

  it('a rule change that hides names in a marked directory applies to its next LOOKUP', async () => {
    // The kernel keeps the directory's node across the change (a forgotten node would be looked up anew,
    // and marked or not under the new rules); counted once the loop is over (ruleChangeRace waits for it).
    const { f, run } = await ruleChangeRace({
      fill: ['for i in $(seq 20); do test -e f$i && exit 9; echo x > f$i; done'],
      after: ['test -e secrets; echo $?', 'mkdir secrets 2>/dev/null; echo $?'],
    });
    expect(await nativeLookupCount(f)).toBeGreaterThanOrEqual(15);
    const before = await nativeLookupCount(f);
    await f.worker.client.request('setRules', { rules: HIDE_SECRETS });
    const r = await run;
    expect(r.stdout).toBe('1\n1\n');
    await f.waitAudit(
      (e) => e.path === '/output/d/secrets' && e.decision === 'deny' && e.op === 'lookup',
      5000,
    );
    expect(await nativeLookupCount(f)).toBe(before);
    // A directory made after the change is decided by the new rules: refused, nothing in the delta.
    expect((await f.host(`test -e ${f.delta}/upper/output/d/secrets; echo $?`)).stdout).toBe('1\n');
  }, 60_000);

  it('a marked directory moved under a rule that hides names is decided by it at once', async () => {
    const f = await mountFixture({
      tree: { output: { dir: true }, 'output/locked/.keep': '' },
      rules: HIDE_SECRETS_IN_LOCKED,
      warmupEntries: 0,
    });
    await fill(f, 'output/d');
    expect((await f.sandbox('mv output/d output/locked/d')).code).toBe(0);
    await expectHiddenAndAudited(f, 'output/locked/d/secrets');
  }, 60_000);

  it('a directory whose rules hide some names is never answered by the binding', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: HIDE_SECRETS, warmupEntries: 0 });
    const r = await f.sandbox(
      'mkdir output/d && for i in $(seq 20); do test -e output/d/f$i; echo x > output/d/f$i; done',
    );
    expect(r.code).toBe(0);
    expect(await nativeLookupCount(f)).toBe(0);
    await expectHiddenAndAudited(f, 'output/d/secrets');
  }, 60_000);

  it('a name that is not UTF-8 is refused as before (EINVAL), not answered as missing', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN, warmupEntries: 0 });
    await fill(f, 'output/d');
    const r = await f.sandbox(
      `python3 -c 'import os, errno
try:
    os.lstat(b"output/d/caf\\xe9")
    print("found")
except OSError as e:
    print(errno.errorcode[e.errno])'`,
    );
    expect(r.stdout).toBe('EINVAL\n');
  }, 60_000);
});
