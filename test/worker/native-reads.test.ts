// READs of files the worker already decided are answered by the binding in C (nativeReads,
// docs/decisions.md, "READs of decided files are answered in the binding"). What a user checks: the bytes
// read are the file's, whatever the offsets and sizes, for a codebase file and for one the sandbox just
// wrote (registered when the worker served its WRITE), the end of the file reads short as it should, and
// the switch turns it off. The attacks (rule changes, fd reuse, a file replaced behind the mount) are in
// test/security/native-reads.test.ts.
import { describe, expect, it } from 'vitest';
import {
  AGENT_SAFE,
  mountFixture,
  useMountHygiene,
  withEnv,
  nativeReadCount,
  type MountedFixture,
} from '../helpers/worker-fixture.js';

/** A codebase file of random bytes, size not a multiple of a page: data/big.bin. */
async function bigFile(f: MountedFixture, bytes: number): Promise<string> {
  await f.host(`mkdir -p ${f.lower}/data && head -c ${bytes} /dev/urandom > ${f.lower}/data/big.bin`);
  return (await f.host(`sha256sum < ${f.lower}/data/big.bin`)).stdout.split(' ')[0]!;
}

/** Python: O_DIRECT-free random preads of data/big.bin compared with the host's copy passed on stdin. */
const RANDOM_PREADS = `
import os, sys, random
want = sys.stdin.buffer.read()
fd = os.open("data/big.bin", os.O_RDONLY)
random.seed(3)
bad = 0
for i in range(300):
    off = random.randint(0, len(want) + 100)
    n = random.choice([1, 100, 4096, 5000, 65536, 300000])
    if os.pread(fd, n, off) != want[off:off + n]: bad += 1
print("bad", bad)
`;

/** Python: 700 files of 5,000 random bytes in output/t, each written by its own open (write-only). */
const WRITE_TREE = `
import os
os.mkdir("output/t")
for i in range(1, 701):
    with open(f"output/t/{i}", "wb") as o: o.write(os.urandom(5000))
`;

/** Python: the sha256 of the 700 files read in order, as `cat` would concatenate them. */
const READ_TREE = `
import hashlib
h = hashlib.sha256()
for i in range(1, 701):
    with open(f"output/t/{i}", "rb") as o: h.update(o.read())
print(h.hexdigest())
`;

describe('READs answered in the binding', () => {
  useMountHygiene();

  it('a codebase file reads byte for byte, sequentially and at random offsets past its end', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE, warmupEntries: 0 });
    expect((await f.worker.client.request('stats', {})).fuse?.features.nativeReads).toBe(true);
    const sum = await bigFile(f, 6 * 1024 * 1024 + 123);
    expect((await f.sandbox('sha256sum < data/big.bin')).stdout.split(' ')[0]).toBe(sum);
    // The first READ decided in JS, the file's later ones (the kernel's read-ahead) in C.
    expect(await nativeReadCount(f)).toBeGreaterThan(0);
    const host = await f.host(`cat ${f.lower}/data/big.bin | base64 -w0`);
    const r = await f.sandbox(`base64 -d | python3 -c '${RANDOM_PREADS}'`, { stdin: host.stdout });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('bad 0');
  }, 60_000);

  it('a file the sandbox just wrote reads back in C (registered at its WRITE)', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE, warmupEntries: 0 });
    // Created write-only: written with direct I/O, so its pages are not in the mount's page cache and
    // every READ reaches the worker; the first already finds the node registered by its WRITEs.
    const w = await f.sandbox('head -c 3000000 /dev/urandom > output/w.bin && sha256sum < output/w.bin');
    expect(w.stderr).toBe('');
    expect((await f.host(`sha256sum < ${f.delta}/upper/output/w.bin`)).stdout.split(' ')[0]).toBe(
      w.stdout.split(' ')[0],
    );
    const stats = await f.worker.client.request('stats', {});
    expect(stats.ops['read-native']?.count ?? 0).toBeGreaterThan(0);
    expect(stats.ops.read?.count ?? 0).toBe(0);
  }, 60_000);

  it('a tree of 700 files just written reads back in C, every file (the worker keeps their fds)', async () => {
    // grep -r after tar -xf: with the former 512 fds the LRU evicted each file just before it was read.
    for (const disable of ['', 'wideHandles']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE, warmupEntries: 0 }),
      );
      // Created write-only: direct I/O, so every READ reaches the mount's server.
      const made = await f.sandbox(`python3 -c '${WRITE_TREE}'`);
      expect(made.stderr).toBe('');
      const before = (await f.worker.client.request('stats', {})).ops.read?.count ?? 0;
      const r = await f.sandbox(`python3 -c '${READ_TREE}'`);
      expect(r.stderr).toBe('');
      const host = await f.host(`cd ${f.delta}/upper/output/t && cat $(seq 700) | sha256sum`);
      expect(r.stdout.trim()).toBe(host.stdout.split(' ')[0]);
      const inJs = ((await f.worker.client.request('stats', {})).ops.read?.count ?? 0) - before;
      if (disable === '') expect(inJs).toBe(0);
      else expect(inJs).toBeGreaterThanOrEqual(700 - 512);
      await f.stop();
    }
  }, 120_000);

  it('AGENTFENSE_FUSE_DISABLE=nativeReads serves every READ in JS', async () => {
    const f = await withEnv('AGENTFENSE_FUSE_DISABLE', 'nativeReads', () =>
      mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE, warmupEntries: 0 }),
    );
    const stats = await f.worker.client.request('stats', {});
    expect(stats.fuse?.features.nativeReads).toBe(false);
    expect(stats.fuse?.disabled).toContain('nativeReads');
    const sum = await bigFile(f, 3 * 1024 * 1024 + 7);
    expect((await f.sandbox('sha256sum < data/big.bin')).stdout.split(' ')[0]).toBe(sum);
    expect(await nativeReadCount(f)).toBe(0);
    expect((await f.worker.client.request('stats', {})).ops.read?.count).toBeGreaterThan(1);
  }, 60_000);
});
