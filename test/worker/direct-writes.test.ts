// Files the sandbox creates write-only are written with direct I/O (directWrites, docs/decisions.md, "Files
// created write-only are written with direct I/O"): every write still reaches the worker, but nothing is
// copied into the mount's page cache on the way. What a user checks: the data is all there, readers see it as
// it is written, set-id bits go as on Linux, and the switch turns it off.
import { describe, expect, it } from 'vitest';
import {
  AGENT_SAFE,
  mountFixture,
  useMountHygiene,
  type MountedFixture,
  withEnv,
} from '../helpers/worker-fixture.js';

/** Pages of `file` (in the mount) resident in the kernel's page cache, by fincore. */
async function residentPages(f: MountedFixture, file: string): Promise<number> {
  const r = await f.sandbox(`fincore --bytes --noheadings --output PAGES ${file}`);
  expect(r.stderr).toBe('');
  return Number(r.stdout.trim());
}

describe('direct writes of files created write-only', () => {
  useMountHygiene();

  it('writes 8 MiB that all arrive, with none of it held in the mount page cache', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE });
    expect((await f.worker.client.request('stats', {})).fuse?.features.directWrites).toBe(true);
    const w = await f.sandbox('head -c 8388608 /dev/urandom | tee output/big.bin | sha256sum');
    expect(w.code).toBe(0);
    expect(await residentPages(f, 'output/big.bin')).toBe(0);
    // The bytes in the delta are the bytes written, and a read through the mount (a cached open) gives them.
    const sum = w.stdout.split(' ')[0];
    expect((await f.sandbox('sha256sum < output/big.bin')).stdout.split(' ')[0]).toBe(sum);
    expect((await f.host(`sha256sum < ${f.delta}/upper/output/big.bin`)).stdout.split(' ')[0]).toBe(sum);
  }, 60_000);

  it('AGENTFENSE_FUSE_DISABLE=directWrites writes through the page cache as before', async () => {
    const f = await withEnv('AGENTFENSE_FUSE_DISABLE', 'directWrites', () =>
      mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE }),
    );
    const fuse = (await f.worker.client.request('stats', {})).fuse;
    expect(fuse?.features.directWrites).toBe(false);
    expect(fuse?.disabled).toContain('directWrites');
    expect((await f.sandbox('head -c 1048576 /dev/zero > output/big.bin')).code).toBe(0);
    expect(await residentPages(f, 'output/big.bin')).toBe(256);
  }, 60_000);

  it('a reader that opened the file sees each write as it lands, also over pages it had cached', async () => {
    const f = await mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE });
    // The writer's descriptor is direct; the reader's is an ordinary cached one (tail -f, a log viewer).
    const py = [
      'import os',
      'w = os.open("output/log.txt", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)',
      'os.write(w, b"first line\\n")',
      'r = os.open("output/log.txt", os.O_RDONLY)',
      'print(os.pread(r, 100, 0))',
      'os.write(w, b"second line\\n")',
      'print(os.pread(r, 100, 0))',
      'os.pwrite(w, b"FIRST", 0)',
      'print(os.pread(r, 100, 0))',
    ].join('\n');
    const r = await f.sandbox(`python3 -c '${py}'`);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(
      "b'first line\\n'\nb'first line\\nsecond line\\n'\nb'FIRST line\\nsecond line\\n'\n",
    );
  }, 60_000);
});
