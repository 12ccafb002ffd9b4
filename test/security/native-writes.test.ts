// Attack: write past the decisions the binding answers WRITEs on (nativeWrites: WRITEs on files the worker
// already decided are answered in C, fuse-native/native/fast.c). Fill the disk through that path, keep
// writing through a descriptor after the rules took write away (also one whose host handle the worker keeps
// open: a file that lost one of its names). Defence: the binding spends only a grant of the quota's free
// bytes, charged per WRITE with the most it can add, and hands a WRITE that does not fit to the worker
// (DiskQuota.lend/settle); every registration is dropped at a rule change (FsCore.setRules) and before its
// fd closes (HandleCache.beforeClose). The accepted bytes are the JS path's to the byte.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import {
  AGENT_SAFE,
  mountFixture,
  useMountHygiene,
  type MountedFixture,
  withEnv,
  nativeWriteCount,
} from '../helpers/worker-fixture.js';

const MiB = 1024 * 1024;

/** Python: writes 64 KiB blocks to output/fill until ENOSPC; prints the bytes the file accepted. */
const FILL = `
import os, errno
fd = os.open("output/fill", os.O_WRONLY | os.O_CREAT, 0o644)
total = 0
try:
    while True:
        total += os.write(fd, b"z" * 65536)
except OSError as e:
    print(errno.errorcode[e.errno], total, os.fstat(fd).st_size)
`;

/**
 * Python: opens output/open.txt (after `before`, shell-free python lines), writes twice (the second answered
 * in C), waits until the rules change (flag/ shows up), writes again and prints the outcome.
 */
function afterRevocation(before: string[]): string {
  return [
    'import os, time, errno',
    ...before,
    'fd = os.open("output/open.txt", os.O_WRONLY | os.O_CREAT, 0o644)',
    'os.write(fd, b"a" * 4096); os.write(fd, b"b" * 4096)',
    'deadline = time.time() + 30',
    'while not os.path.exists("flag/.keep") and time.time() < deadline: time.sleep(0.05)',
    'try:',
    '    os.write(fd, b"c" * 4096); print("written")',
    'except OSError as e:',
    '    print(errno.errorcode[e.errno])',
  ].join('\n');
}

/** Runs `py` in the sandbox, takes write on output/ away once open.txt holds 8 KiB, returns its output. */
async function revokeWhileOpen(f: MountedFixture, py: string): Promise<string> {
  const run = f.sandbox(`python3 -c '${py}'`);
  for (let i = 0; i < 300; i++) {
    const st = await f.host(`stat -c %s ${f.delta}/upper/output/open.txt 2>/dev/null`);
    if (st.stdout.trim() === '8192') break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(await nativeWriteCount(f)).toBeGreaterThan(0);
  await f.worker.client.request('setRules', {
    rules: [
      ...AGENT_SAFE,
      { pattern: '/output/**', permission: 'read', priority: 200 },
      { pattern: '/flag/**', permission: 'read', priority: 200 },
    ],
  });
  const r = await run;
  expect(r.stderr).toBe('');
  expect((await readFile(`${f.delta}/upper/output/open.txt`)).length).toBe(8192);
  return r.stdout;
}

const HIDDEN_FLAG = [...AGENT_SAFE, { pattern: '/flag/**', permission: 'none' as const, priority: 200 }];

describe('WRITEs answered in the binding: quota and rule changes', () => {
  useMountHygiene();

  it('the disk quota stops writes at the same byte as the JS path, and nothing lands past it', async () => {
    const accepted: string[] = [];
    for (const disable of ['', 'nativeWrites']) {
      const f = await withEnv('AGENTFENSE_FUSE_DISABLE', disable, () =>
        mountFixture({ tree: { output: { dir: true } }, rules: AGENT_SAFE, diskQuotaBytes: 8 * MiB }),
      );
      const r = await f.sandbox(`python3 -c '${FILL}'`);
      expect(r.stderr).toBe('');
      const [code, total, size] = r.stdout.trim().split(' ');
      expect(code).toBe('ENOSPC');
      expect(size).toBe(total);
      expect(Number(total)).toBeLessThanOrEqual(8 * MiB);
      const du = await f.host(`du -sb ${f.delta}/upper | cut -f1`);
      expect(Number(du.stdout.trim())).toBeLessThanOrEqual(8 * MiB + 64 * 1024);
      expect((await f.sandbox('stat -c %s output/fill')).stdout.trim()).toBe(total);
      if (disable === '') expect(await nativeWriteCount(f)).toBeGreaterThan(50);
      else expect(await nativeWriteCount(f)).toBe(0);
      accepted.push(total!);
      await f.stop();
    }
    expect(accepted[0]).toBe(accepted[1]);
  }, 120_000);

  it('a rule change takes write away from a file the sandbox already has open', async () => {
    const f = await mountFixture({ tree: { output: { dir: true }, 'flag/.keep': '' }, rules: HIDDEN_FLAG });
    expect(await revokeWhileOpen(f, afterRevocation([]))).toBe('EACCES\n');
  }, 60_000);

  it('... also when the worker keeps the file open across the change (one of its names removed)', async () => {
    const f = await mountFixture({ tree: { output: { dir: true }, 'flag/.keep': '' }, rules: HIDDEN_FLAG });
    // A second name removed: the worker keeps the node's host file open from then on (its handle pinned).
    const setUp = [
      'open("output/open.txt", "w").close()',
      'os.link("output/open.txt", "output/other.txt")',
      'os.unlink("output/other.txt")',
    ];
    expect(await revokeWhileOpen(f, afterRevocation(setUp))).toBe('EACCES\n');
  }, 60_000);
});
