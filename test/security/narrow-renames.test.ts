// Attack: use a RENAME the binding lets keep its fast paths (narrowRenames: a RENAME of a file out of a
// directory only the sandbox made ends only the moved and the replaced node's state, fuse-native's
// native/fast-rename.c) to keep a mark or a registration past a change of the rules that apply. Move a
// file open for reading and writing out of such a directory towards a read-only, a hidden and a writable
// path and keep using the old descriptor and the new name; move a marked DIRECTORY elsewhere, where names
// in it are hidden, and create one there; race a name between file and directory against a loop moving
// it. Defences: the binding takes a RENAME as a file's only when fstatat in the marked source directory
// says the name is no directory (the kernel holds both parents locked until the answer), and the worker
// confirms it from its inode table before it changes anything (fs/rename-nodes.ts), else every mark and
// registration ends as before; the moved and the replaced node's own state ends at the worker's turn and
// again at the reply. The outcome must be the worker's: the same as with the switch off.
import { describe, expect, it } from 'vitest';
import type { PermissionRule } from '@agentfense/protocol';
import { mountFixture, useMountHygiene, withEnv, type MountedFixture } from '../helpers/worker-fixture.js';
import { WRITABLE_OUTPUT } from '../helpers/native-paths.js';

/** `/output/**` writable, `/secret/**` hidden, and below output/x every `*.key` hidden. */
const RULES: readonly PermissionRule[] = [
  ...WRITABLE_OUTPUT,
  { pattern: '/secret/**', permission: 'none', priority: 100 },
  { pattern: '/output/x/**/*.key', permission: 'none', priority: 100 },
];

async function mounted(disable: string): Promise<MountedFixture> {
  const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
    mountFixture({
      tree: { output: { dir: true }, 'output/w/.keep': '', 'secret/.keep': '' },
      rules: [...RULES],
      warmupEntries: 0,
    }),
  );
  expect((await f.worker.client.request('stats', {})).fuse?.features.narrowRenames).toBe(disable === '');
  return f;
}

/**
 * Python: a file made in the marked output/d, open read-write and registered for the binding's READs and
 * WRITEs, moved towards each target; after each try the old descriptor is written and read and the old and
 * the new name are read and statted.
 */
const MOVE_OPEN_FILE = `
import os, errno, stat
def e(fn):
    try:
        r = fn()
        return "ok" if r is None else str(r)
    except OSError as x:
        return errno.errorcode[x.errno]
os.mkdir("output/d"); os.path.exists("output/d/x")
fd = os.open("output/d/f", os.O_RDWR | os.O_CREAT, 0o644)
for i in range(4): os.pwrite(fd, b"a" * 65536, i * 65536)
for i in range(4): os.pread(fd, 65536, i * 65536)
at = "output/d/f"
for to in ["ro.txt", "secret/f", "output/w/f", "output/d/g"]:
    r = e(lambda: os.rename(at, to))
    if r == "ok": at = to
    print(to, r, e(lambda: os.pwrite(fd, b"b" * 100, 0)), e(lambda: len(os.pread(fd, 65536, 65536))),
          e(lambda: oct(stat.S_IMODE(os.stat(to).st_mode))), e(lambda: len(open(to, "rb").read())),
          e(lambda: os.stat("output/d/f").st_size))
`;

/** Shell: marked output/a/d moved below output/x, where `*.key` is hidden, then a key made in it; a
 * directory moved the other way, into the marked output/a. */
const MOVE_DIR = [
  'mkdir -p output/a/d output/x && test -e output/a/x; test -e output/a/d/x',
  'mv output/a/d output/x/d; echo moved=$?',
  '(echo s > output/x/d/secret.key) 2>/dev/null; echo create=$?',
  'test -e output/x/d/secret.key; echo seen=$?',
  'mkdir output/x/e && test -e output/x/e/x; mv output/x/e output/a/e; echo back=$?',
  '(echo s > output/a/e/k.key) 2>/dev/null; echo into=$?',
  'ls output/x/d output/a/e',
].join('\n');

/** Shell: output/a/n turns between a marked directory, nothing and a file while a loop moves it below
 * output/x and tries to make a hidden key in it whenever a directory landed there. */
const RACE = [
  'mkdir -p output/a output/x && test -e output/a/x',
  '( for i in $(seq 400); do mkdir output/a/n 2>/dev/null && test -e output/a/n/x; ' +
    'rmdir output/a/n 2>/dev/null; : > output/a/n 2>/dev/null; rm -f output/a/n; done ) &',
  'dirs=0',
  'for i in $(seq 400); do if mv output/a/n output/x/n 2>/dev/null; then',
  '  if [ -d output/x/n ]; then dirs=$((dirs+1)); (echo s > output/x/n/secret.key) 2>/dev/null && echo LEAK; fi',
  '  rm -rf output/x/n; fi; done',
  'wait',
  'echo dirs=$dirs',
].join('\n');

/** Hidden keys that reached the writable layer, and how many journal records name one. */
async function keysLanded(f: MountedFixture): Promise<string> {
  const found = await f.host(
    `cd ${f.delta} && find upper -name "*.key" -path "*output/x/*"; cat meta/journal-*.jsonl | grep -c secret.key`,
  );
  return found.stdout.trim();
}

describe('RENAMEs that keep the fast paths: the worker keeps deciding', () => {
  useMountHygiene();

  it('a file open for reading and writing, moved out of its directory, is refused and served as the worker does', async () => {
    const seen: string[] = [];
    for (const disable of ['', 'narrowRenames']) {
      const f = await mounted(disable);
      const r = await f.sandbox(`python3 -c '${MOVE_OPEN_FILE}'`);
      expect(r.stderr).toBe('');
      seen.push(r.stdout);
      await f.stop();
    }
    expect(seen[0]).toBe(
      [
        'ro.txt EACCES 100 65536 ENOENT ENOENT 262144',
        'secret/f ENOENT 100 65536 ENOENT ENOENT 262144',
        'output/w/f ok 100 65536 0o644 262144 ENOENT',
        'output/d/g ok 100 65536 0o644 262144 ENOENT',
        '',
      ].join('\n'),
    );
    expect(seen[1]).toBe(seen[0]);
  }, 120_000);

  it('a marked directory moved where names in it are hidden: a create there obeys the rules there', async () => {
    const seen: string[] = [];
    for (const disable of ['', 'narrowRenames']) {
      const f = await mounted(disable);
      const r = await f.sandbox(MOVE_DIR);
      expect(r.stderr).toBe('');
      expect(await keysLanded(f)).toBe('0');
      seen.push(r.stdout);
      await f.stop();
    }
    expect(seen[0]).toMatch(/^moved=0\ncreate=2\nseen=1\nback=0\ninto=0\n/);
    expect(seen[1]).toBe(seen[0]);
  }, 120_000);

  it('a name raced between file and directory while it is moved never lets a hidden key be made', async () => {
    const f = await mounted('');
    const r = await f.sandbox(RACE);
    expect(r.stdout).not.toContain('LEAK');
    expect(r.stdout).toMatch(/dirs=[1-9]\d*\n$/);
    expect(await keysLanded(f)).toBe('0');
  }, 120_000);
});
