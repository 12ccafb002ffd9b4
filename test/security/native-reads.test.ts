// Attack: read past the decisions the binding answers READs on (nativeReads: READs of files the worker
// already decided are answered in C, fuse-native/native/fast-read.c). Keep reading through a descriptor
// after the rules made the file `view` or `none` (also one whose host fd the worker keeps open across the
// change); make the worker close a registered node's fd and open
// other files so the number is reused, then read the first node again; replace the file behind the mount
// while it is open. Defence: every registration ends at a rule change (FsCore.setRules, invalidateAll) and
// before its fd closes (HandleCache.beforeClose -> NativeReads.closing); the binding reads only the fd the
// worker registered, never a path. The READ outcome is the JS path's.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { PermissionRule } from '@agentfense/protocol';
import {
  AGENT_SAFE,
  mountFixture,
  nativeReadCount,
  useMountHygiene,
  withEnv,
  type MountedFixture,
} from '../helpers/worker-fixture.js';

const MiB = 1024 * 1024;

/** data/big.bin: 8 MiB of random bytes in the codebase; returns the sha256 of its last MiB. */
async function bigFile(f: MountedFixture): Promise<string> {
  await f.host(`mkdir -p ${f.lower}/data && head -c ${8 * MiB} /dev/urandom > ${f.lower}/data/big.bin`);
  return (await f.host(`tail -c ${MiB} ${f.lower}/data/big.bin | sha256sum`)).stdout.split(' ')[0]!;
}

/**
 * Python: opens data/big.bin, reads its first 2 MiB in 128 KiB steps (the later READs answered in C), runs
 * `between`, waits for flag/.keep (made visible by the test, or present from the start), then reads the
 * last MiB and prints its sha256 or the errno.
 */
function readAcross(between: string[] = [], before: string[] = [], file = 'data/big.bin'): string {
  return [
    'import os, time, errno, hashlib',
    ...before,
    `fd = os.open("${file}", os.O_RDONLY)`,
    'for off in range(0, 2 << 20, 128 << 10): os.pread(fd, 128 << 10, off)',
    'open("output/ready", "w").close()',
    ...between,
    'deadline = time.time() + 30',
    'while not os.path.exists("flag/.keep") and time.time() < deadline: time.sleep(0.05)',
    'try:',
    '    d = b"".join(os.pread(fd, 128 << 10, off) for off in range(7 << 20, 8 << 20, 128 << 10))',
    '    print(hashlib.sha256(d).hexdigest())',
    'except OSError as e:',
    '    print(errno.errorcode[e.errno])',
  ].join('\n');
}

/** Waits until the sandbox's script said it has read (output/ready in the delta). */
async function ready(f: MountedFixture): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if ((await f.host(`test -e ${f.delta}/upper/output/ready && echo y`)).stdout.trim() === 'y') return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the sandbox never became ready');
}

const HIDDEN_FLAG: readonly PermissionRule[] = [
  ...AGENT_SAFE,
  { pattern: '/flag/**', permission: 'none', priority: 200 },
];

/** Reads across a rule change that makes data/big.bin `permission`; returns what the last read printed. */
async function revokeWhileOpen(permission: 'view' | 'none'): Promise<string> {
  const f = await mountFixture({
    tree: { output: { dir: true }, 'flag/.keep': '' },
    rules: HIDDEN_FLAG,
    warmupEntries: 0,
  });
  await bigFile(f);
  const run = f.sandbox(`python3 -c '${readAcross()}'`);
  await ready(f);
  expect(await nativeReadCount(f)).toBeGreaterThan(0);
  await f.worker.client.request('setRules', {
    rules: [
      ...AGENT_SAFE,
      { pattern: '/data/**', permission, priority: 200 },
      { pattern: '/flag/**', permission: 'read', priority: 200 },
    ],
  });
  const r = await run;
  expect(r.stderr).toBe('');
  return r.stdout.trim();
}

describe('READs answered in the binding: rule changes, fd reuse, replaced files', () => {
  useMountHygiene();

  it('a rule change to `view` takes read away from a file the sandbox already has open', async () => {
    expect(await revokeWhileOpen('view')).toBe('EACCES');
  }, 60_000);

  it('a rule change to `none` hides a file the sandbox already has open', async () => {
    expect(await revokeWhileOpen('none')).toBe('ENOENT');
  }, 60_000);

  it('... also when the worker keeps the file open across the change (one of its names removed)', async () => {
    const f = await mountFixture({
      tree: { output: { dir: true }, 'flag/.keep': '' },
      rules: HIDDEN_FLAG,
      warmupEntries: 0,
    });
    // Written in the sandbox, then a second name made and removed: the worker keeps the node's host file
    // open from then on (its handle pinned), also across the rule change that closes every other one.
    const setUp = [
      'w = os.open("output/r.bin", os.O_WRONLY | os.O_CREAT, 0o644)',
      'os.write(w, os.urandom(8 << 20)); os.close(w)',
      'os.link("output/r.bin", "output/other.bin")',
      'os.unlink("output/other.bin")',
    ];
    const run = f.sandbox(`python3 -c '${readAcross([], setUp, 'output/r.bin')}'`);
    await ready(f);
    expect(await nativeReadCount(f)).toBeGreaterThan(0);
    await f.worker.client.request('setRules', {
      rules: [
        ...AGENT_SAFE,
        { pattern: '/output/**', permission: 'view', priority: 200 },
        { pattern: '/flag/**', permission: 'read', priority: 200 },
      ],
    });
    const r = await run;
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('EACCES');
  }, 60_000);

  it('a registered fd closed by the worker and its number reused never reads another file', async () => {
    // Every other file read opens a host handle in the worker (no read-ahead, no store-ahead), so the
    // handle cache (512 with wideHandles off) evicts big.bin's: its fd closes and later opens take the number.
    const f = await withEnv('AGENTFENSE_FUSE_DISABLE', 'readahead,storeAhead,wideHandles', () =>
      mountFixture({
        tree: { output: { dir: true }, 'flag/.keep': '' },
        rules: AGENT_SAFE,
        warmupEntries: 0,
      }),
    );
    const want = await bigFile(f);
    await f.host(
      `mkdir -p ${f.lower}/data/many && for i in $(seq 600); do head -c 9000 /dev/urandom > ${f.lower}/data/many/$i; done`,
    );
    const others = ['for i in range(1, 601):', '    with open(f"data/many/{i}", "rb") as o: o.read()'];
    const r = await f.sandbox(`python3 -c '${readAcross(others)}'`);
    expect(r.stderr).toBe('');
    expect(await nativeReadCount(f)).toBeGreaterThan(0);
    expect(r.stdout.trim()).toBe(want);
  }, 120_000);

  it('a file replaced behind the mount reads as its new content once the worker is told, as in JS', async () => {
    const seen: string[] = [];
    const zeros = createHash('sha256').update(Buffer.alloc(MiB)).digest('hex');
    for (const disable of ['', 'nativeReads']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({
          tree: { output: { dir: true }, 'flag/.keep': '' },
          rules: HIDDEN_FLAG,
          warmupEntries: 0,
        }),
      );
      await bigFile(f);
      const run = f.sandbox(`python3 -c '${readAcross()}'`);
      await ready(f);
      // Replaced by a rename, as editors and `git checkout` do; then a rule change, after which the worker
      // serves every READ from the file the path names now (it reopens it): never the old fd's bytes.
      await f.host(
        `head -c ${8 * MiB} /dev/zero > ${f.lower}/data/new.bin && mv ${f.lower}/data/new.bin ${f.lower}/data/big.bin`,
      );
      await f.worker.client.request('setRules', {
        rules: [...AGENT_SAFE, { pattern: '/flag/**', permission: 'read', priority: 200 }],
      });
      const r = await run;
      expect(r.stderr).toBe('');
      expect(r.stdout.trim()).toBe(zeros);
      if (disable === '') expect(await nativeReadCount(f)).toBeGreaterThan(0);
      seen.push(r.stdout.trim());
      await f.stop();
    }
    expect(seen[0]).toBe(seen[1]);
  }, 120_000);
});
