// WRITEs on files the worker already decided are answered by the binding in C (nativeWrites,
// docs/decisions.md, "WRITEs on decided files are answered in the binding"). What a user checks: the
// bytes are exactly what was written whatever the pattern, the disk quota stops writes at the same byte as
// without it, a rule change takes write away from a file already open, a worker crash loses nothing, and
// the switch turns it off. The quota and rule-change attacks are in test/security/native-writes.test.ts.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { clearFuseMount } from '@agentfense/fuse-worker';
import {
  AGENT_SAFE,
  mountFixture,
  useMountHygiene,
  withEnv,
  nativeWriteCount,
} from '../helpers/worker-fixture.js';

/**
 * Python run in the sandbox: writes output/f.bin in every pattern against an in-memory model of the file,
 * then reads it back through the mount and prints whether it matches, and the model's sha256.
 */
const PATTERNS = `
import os, random, hashlib
random.seed(7)
model = bytearray()
def put(off, data):
    if len(model) < off + len(data):
        model.extend(bytes(off + len(data) - len(model)))
    model[off:off + len(data)] = data
p = "output/f.bin"
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
pos = 0
for i in range(200):
    d = random.randbytes(random.randint(1, 9000))
    os.write(fd, d); put(pos, d); pos += len(d)
for i in range(200):
    off = random.randint(0, len(model) + 5000)
    d = random.randbytes(random.randint(1, 5000))
    os.pwrite(fd, d, off); put(off, d)
off = len(model) + 10 * 1024 * 1024
os.pwrite(fd, b"sparse", off); put(off, b"sparse")
os.ftruncate(fd, 12345); del model[12345:]
os.pwrite(fd, b"after a hole", 40000); put(40000, b"after a hole")
os.ftruncate(fd, 50000); model.extend(bytes(50000 - len(model)))
os.pwrite(fd, b"x" * 3000, 100); put(100, b"x" * 3000)
a = os.open(p, os.O_WRONLY | os.O_APPEND)
for i in range(50):
    d = random.randbytes(random.randint(1, 3000))
    os.write(a, d); put(len(model), d)
rw = os.open(p, os.O_RDWR)
for i in range(50):
    off = random.randint(0, len(model))
    d = random.randbytes(random.randint(1, 3000))
    os.pwrite(rw, d, off); put(off, d)
for x in (fd, a, rw): os.close(x)
with open(p, "rb") as r: seen = r.read()
print("same" if seen == bytes(model) else "DIFFERENT", len(model), hashlib.sha256(model).hexdigest())
`;

describe('WRITEs answered in the binding', () => {
  useMountHygiene();

  it('every write pattern lands byte for byte: sequential, random offsets, sparse, truncate between, O_APPEND', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE });
    expect((await f.worker.client.request('stats', {})).fuse?.features.nativeWrites).toBe(true);
    const r = await f.sandbox(`python3 -c '${PATTERNS}'`);
    expect(r.stderr).toBe('');
    const [verdict, size, sum] = r.stdout.trim().split(' ');
    expect(verdict).toBe('same');
    const upper = await readFile(`${f.delta}/upper/output/f.bin`);
    expect(String(upper.length)).toBe(size);
    expect((await f.host(`sha256sum < ${f.delta}/upper/output/f.bin`)).stdout.split(' ')[0]).toBe(sum);
    // Most of the ~550 WRITEs never reached JS.
    expect(await nativeWriteCount(f)).toBeGreaterThan(400);
  }, 60_000);

  it('a worker SIGKILLed right after writes answered in C loses none of them', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE });
    const w = await f.sandbox(
      `python3 -c 'import os, hashlib
fd = os.open("output/c.bin", os.O_WRONLY | os.O_CREAT, 0o644)
d = os.urandom(4 * 1024 * 1024)
for i in range(0, len(d), 8192): os.write(fd, d[i:i + 8192])
print(hashlib.sha256(d).hexdigest())'`,
    );
    expect(w.stderr).toBe('');
    expect(await nativeWriteCount(f)).toBeGreaterThan(400);
    process.kill(f.worker.pid, 'SIGKILL');
    await f.worker.exited;
    await clearFuseMount(f.mnt);
    await f.stop();
    const g = await mountFixture({ rules: AGENT_SAFE, lowerDir: f.lower, deltaDir: f.delta });
    expect((await g.sandbox('sha256sum < output/c.bin')).stdout.split(' ')[0]).toBe(w.stdout.trim());
  }, 60_000);

  it('AGENTFENSE_FUSE_DISABLE=nativeWrites serves every WRITE in JS', async () => {
    const f = await withEnv('AGENTFENSE_FUSE_DISABLE', 'nativeWrites', () =>
      mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE }),
    );
    const stats = await f.worker.client.request('stats', {});
    expect(stats.fuse?.features.nativeWrites).toBe(false);
    expect(stats.fuse?.disabled).toContain('nativeWrites');
    expect((await f.sandbox('head -c 1048576 /dev/urandom > output/x')).code).toBe(0);
    expect(await nativeWriteCount(f)).toBe(0);
    expect((await f.worker.client.request('stats', {})).ops.write?.count).toBeGreaterThan(0);
  }, 60_000);
});
