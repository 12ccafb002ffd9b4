// Attack: get a listing answered by the binding (nativeListings: READDIRPLUS and READDIR of the sandbox's
// own directories are answered in C, fuse-native/native/fast-listing.c) where the worker would list
// otherwise: names a rule change has just hidden (in a new listing, and in the rest of one begun before the
// change), a directory the codebase gained behind the mount (its merged view holds the codebase's
// entries), and names of that codebase the sandbox removed (whiteouts).
// Each time the listing must be the worker's.
// Defences: a rule change revokes every mark before it applies, and a kept listing serves only under the
// marks' generation it was read in (fast-entries.c, fast-listing.c); the binding checks at each listing
// that the codebase still lacks the marked directory (fast-entries.c current_dir), so nothing is ever
// to be merged or whited out where it answers.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, type MountedFixture } from '../helpers/worker-fixture.js';
import { nativeCount, ruleChangeRace, WRITABLE_OUTPUT } from '../helpers/native-paths.js';

const OPEN = WRITABLE_OUTPUT;

function nativeListingCount(f: MountedFixture): Promise<number> {
  return nativeCount(f, 'readdirplus-native');
}

/** The codebase gains `files` in `dir` behind the mount (another sandbox's commit), and the worker's memory
 * of the codebase lacking them (2 s) runs out. */
async function codebaseGains(f: MountedFixture, dir: string, files: readonly string[]): Promise<void> {
  await mkdir(join(f.lower, dir), { recursive: true });
  for (const file of files) await writeFile(join(f.lower, dir, file), 'codebase\n');
  await new Promise((r) => setTimeout(r, 2500));
}

describe('listings answered in the binding: the worker keeps deciding what is not trivial', () => {
  useMountHygiene();

  it('names a rule change hides are not listed by the next listing', async () => {
    const { f, run } = await ruleChangeRace({
      fill: ['for i in $(seq 40); do echo $i > secret$i; echo $i > open$i; done', 'ls | wc -l'],
      after: ['ls | grep -c secret', 'ls -f | grep -c open'],
    });
    expect(await nativeListingCount(f)).toBeGreaterThan(0);
    await f.worker.client.request('setRules', {
      rules: [...OPEN, { pattern: '/output/d/secret*', permission: 'none' as const, priority: 100 }],
    });
    const r = await run;
    expect(r.stdout).toBe('80\n0\n40\n');
  }, 60_000);

  it('a listing begun before a rule change and continued after it lists none of the names it hid', async () => {
    // The binding keeps a listing it answered from offset 0 so the kernel's next requests continue the
    // same snapshot; one read before the change must not serve the rest after it. getdents64 with a
    // 1 KiB buffer reads the listing a few entries per call; `open*` sort before `secret*`, so the first
    // call has only `open*` names and every `secret*` name comes after the change.
    const reader = [
      'import ctypes, os, time',
      'libc = ctypes.CDLL(None, use_errno=True)',
      'fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)',
      'buf = ctypes.create_string_buffer(1024)',
      'def chunk():',
      '    n = libc.syscall(217, fd, buf, 1024)',
      '    names, at = [], 0',
      '    while at < n:',
      '        size = int.from_bytes(buf.raw[at + 16:at + 18], "little")',
      '        names.append(buf.raw[at + 19:at + size].split(b"\\0")[0].decode())',
      '        at += size',
      '    return n, names',
      'n, first = chunk()',
      'open("/workspace/output/begun", "w").close()',
      'while not os.path.exists("/workspace/flag/.keep"): time.sleep(0.05)',
      'rest = []',
      'while True:',
      '    n, names = chunk()',
      '    if n <= 0: break',
      '    rest += names',
      'print(sum(x.startswith("secret") for x in first), sum(x.startswith("open") for x in first + rest),',
      '      sum(x.startswith("secret") for x in rest))',
    ].join('\n');
    const name = 'x'.repeat(40);
    const { f, run } = await ruleChangeRace({
      fill: [
        `for i in $(seq 60); do echo $i > open_${name}_$i; echo $i > secret_${name}_$i; done`,
        `python3 -c '${reader}' > /workspace/output/counts &`,
        'while [ ! -e /workspace/output/begun ]; do sleep 0.05; done',
      ],
      after: ['wait', 'cat /workspace/output/counts'],
    });
    expect(await nativeListingCount(f)).toBeGreaterThan(0);
    await f.worker.client.request('setRules', {
      rules: [...OPEN, { pattern: '/output/d/secret*', permission: 'none' as const, priority: 100 }],
    });
    const r = await run;
    // No secret in the first part (read before the change), all 60 open names, no secret after it.
    expect(r.stdout).toBe('0 60 0\n');
  }, 60_000);

  it('a directory the codebase gained behind the mount is listed merged', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN, warmupEntries: 0 });
    // output/e shows the binding answers listings there; output/d is not listed before the codebase gains it
    const made = await f.sandbox(
      'mkdir output/d output/e; test -e output/d/x; test -e output/e/x; echo 1 > output/d/mine; ls output/e',
    );
    expect(made).toMatchObject({ code: 0, stdout: '', stderr: '' });
    const before = await nativeListingCount(f);
    expect(before).toBeGreaterThan(0);
    await codebaseGains(f, 'output/d', ['code.txt']);
    const r = await f.sandbox('ls output/d');
    expect(r).toMatchObject({ code: 0, stdout: 'code.txt\nmine\n', stderr: '' });
    expect(await nativeListingCount(f)).toBe(before);
  }, 60_000);

  it('a codebase name the sandbox removed stays whited out, the others listed', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: OPEN, warmupEntries: 0 });
    const made = await f.sandbox('mkdir output/d; test -e output/d/x; echo 1 > output/d/mine; ls output/d');
    expect(made).toMatchObject({ code: 0, stdout: 'mine\n', stderr: '' });
    await codebaseGains(f, 'output/d', ['gone.txt', 'kept.txt']);
    const r = await f.sandbox('rm output/d/gone.txt && ls output/d && ls -f output/d | sort | tr "\\n" " "');
    expect(r).toMatchObject({ code: 0, stdout: 'kept.txt\nmine\n. .. kept.txt mine ', stderr: '' });
    const { changes } = await f.worker.client.request('changes', {});
    expect(changes.map((c) => `${c.kind} ${c.path}`)).toContain('deleted /output/d/gone.txt');
  }, 60_000);
});
