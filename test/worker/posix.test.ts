// POSIX fidelity on a real mount (contract §2): exact 64-bit offsets, nanosecond times, owners and chown
// semantics, special files, set-id bits. Each test is what a user of git/tar/cp -a/make would check.
import { chmod, lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountFixture, useMountHygiene, type MountedFixture } from '../helpers/worker-fixture.js';

/** Runs `sh -c cmd` in the mount as host uid/gid 65534 (no supplementary groups, no capabilities). */
function asNobody(f: MountedFixture, cmd: string): ReturnType<MountedFixture['host']> {
  const quoted = `'${cmd.replaceAll("'", `'\\''`)}'`;
  return f.host(`setpriv --reuid 65534 --regid 65534 --clear-groups --inh-caps=-all sh -c ${quoted}`);
}

/** A full-access mount other uids can reach (the fixture's directory is root-only otherwise). */
async function openMount(): Promise<MountedFixture> {
  const f = await mountFixture({
    tree: { 'f.txt': 'hello world', sub: { dir: true } },
    rules: FULL,
    allowOther: true,
  });
  await chmod(f.base, 0o755);
  return f;
}

const FULL = [{ pattern: '**', permission: 'write' as const }];

describe('POSIX fidelity of the mount', () => {
  useMountHygiene();

  it('a write at offset >= 2^53 is exact or EFBIG, and never lands at the start of the file', async () => {
    const f = await mountFixture({ tree: { 'f.txt': 'hello world' }, rules: FULL });
    // python's os.pwrite is the syscall itself; dd seek= is what the issue reported.
    const py = [
      'import os',
      'fd = os.open("f.txt", os.O_RDWR)',
      'for off in (2**53, 2**53 + 1, 2**56, 2**60, 2**62):',
      '    try:',
      '        n = os.pwrite(fd, b"XY", off)',
      '        print(off, "wrote", n, os.pread(fd, 2, off))',
      '    except OSError as e:',
      '        print(off, "errno", e.errno)',
    ].join('\n');
    const r = await f.host(
      `python3 -c '${py}'; printf XY | dd of=f.txt bs=1 seek=9007199254740992 conv=notrunc status=none; echo dd=$?; cat f.txt`,
    );
    const lines = r.stdout.trim().split('\n');
    // The delta lives on ext4 here (max file size 16 TiB): the host refuses with EFBIG, exactly like a
    // native ext4 disk; a filesystem that stores them (tmpfs) would read back "XY" at the exact offset.
    for (const line of lines.slice(0, 5)) expect(line).toMatch(/^\d+ (errno 27|wrote 2 b'XY')$/);
    expect(lines.at(-1)).toBe('hello world');
    expect(lines).toContain('dd=1');
  });

  it('utimensat keeps nanoseconds, both as host root and in the sandbox, through copy-up and commit', async () => {
    const f = await mountFixture({ tree: { 'f.txt': 'x', sub: { dir: true } }, rules: FULL });
    const py = [
      'import os',
      'os.utime("f.txt", ns=(1_000_000_000_123_456_789, 1_700_000_000_987_654_321))',
      'open("sub/new", "w").close()',
      'os.utime("sub/new", ns=(5, 1_234_567_890_000_000_001))',
      'for p in ("f.txt", "sub/new"):',
      '    st = os.stat(p); print(st.st_atime_ns, st.st_mtime_ns)',
    ].join('\n');
    const expected = '1000000000123456789 1700000000987654321\n5 1234567890000000001\n';
    expect((await f.host(`python3 -c '${py}'`)).stdout).toBe(expected);
    expect((await f.sandbox(`python3 -c '${py}'`)).stdout).toBe(expected);
    await f.worker.client.request('commit', { mode: 'last-writer-wins' });
    expect((await lstat(join(f.lower, 'f.txt'), { bigint: true })).mtimeNs).toBe(1_700_000_000_987_654_321n);
    expect((await lstat(join(f.lower, 'sub/new'), { bigint: true })).mtimeNs).toBe(
      1_234_567_890_000_000_001n,
    );
  });

  it('chown as root: any owner, stored and served back; -1 and no-op chowns succeed', async () => {
    const f = await openMount();
    const r = await f.host(
      [
        'set -e',
        'chown 65534:65533 f.txt && stat -c %u:%g f.txt',
        'chown -h 123:456 sub && stat -c %u:%g sub',
        'ln -s f.txt link && chown -h 7:8 link && stat -c %u:%g link && stat -L -c %u:%g link',
        'python3 -c \'import os; os.chown("f.txt", -1, 42); os.chown("f.txt", 65534, 42)\'',
        'stat -c %u:%g f.txt',
        'touch new && stat -c %u:%g new',
      ].join('\n'),
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('65534:65533\n123:456\n7:8\n65534:65533\n65534:42\n0:0\n');
    // Stored in the delta: a new worker on the same delta serves the same owners.
    await f.stop();
    const again = await mountFixture({ rules: FULL, lowerDir: f.lower, deltaDir: f.delta });
    expect((await again.host('stat -c %u:%g f.txt sub link new')).stdout).toBe(
      '65534:42\n123:456\n7:8\n0:0\n',
    );
  });

  it('as an unprivileged uid: new entries are its own, chown to others is EPERM, sticky dirs and set-gid dirs behave', async () => {
    const f = await openMount();
    await f.host('mkdir -m 1777 pub && mkdir -m 2777 sgid && chgrp 4242 sgid && chown 0:0 f.txt');
    const r = await asNobody(
      f,
      [
        'cd pub',
        'umask 077; echo mine > own && stat -c "%u:%g %a" own',
        'python3 -c \'import os; os.close(os.open("own", os.O_RDWR)); print("reopen ok")\'',
        'chown 0 own 2>/dev/null && echo chown-root-ok || echo chown-root-EPERM',
        'chown 65534:65534 own && echo chown-self-ok',
        'chown 65534 ../f.txt 2>/dev/null && echo steal-ok || echo steal-EPERM',
        'rm own && echo unlinked-own',
        'cd ../sgid && mkdir d && touch g && stat -c "%g %a" d && stat -c %g g',
      ].join('\n'),
    );
    expect(r.stdout).toBe(
      '65534:65534 600\nreopen ok\nchown-root-EPERM\nchown-self-ok\nsteal-EPERM\nunlinked-own\n4242 2700\n4242\n',
    );
    // root's file in the sticky directory: not removable by another uid
    await f.host('touch pub/roots && chmod 666 pub/roots');
    expect((await asNobody(f, 'rm -f pub/roots 2>&1; ls pub')).stdout).toMatch(
      /Operation not permitted[\s\S]*roots/,
    );
  });

  it('set-uid/set-gid are cleared on write and on chown, as Linux does', async () => {
    const f = await openMount();
    await f.host('touch s && chown 65534:65534 s && chmod 6777 s && stat -c %a s');
    expect((await f.host('stat -c %a s')).stdout).toBe('6777\n');
    expect((await asNobody(f, 'echo data >> s; stat -c %a s')).stdout).toBe('777\n');
    await f.host('chmod 6755 s && chown 65534:65534 s');
    expect((await f.host('stat -c %a s')).stdout).toBe('755\n');
  });

  it('set-uid/set-gid are cleared on write to a file created write-only (direct I/O), as Linux does', async () => {
    const f = await openMount();
    await f.host('chmod 1777 sub');
    // Linux clears set-uid, and set-gid where the group may execute; 2745 (no group x) keeps set-gid.
    const py = [
      'import os',
      'for name, mode in (("sub/s", 0o6755), ("sub/g", 0o2745)):',
      '    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)',
      '    os.fchmod(fd, mode)',
      '    os.write(fd, b"data")',
      '    os.close(fd)',
      '    print(oct(os.stat(name).st_mode & 0o7777))',
    ].join('\n');
    expect((await asNobody(f, `python3 -c '${py}'`)).stdout).toBe('0o755\n0o2745\n');
  });

  it('mknod and mkfifo in write areas: devices are inert (nodev), never committed, and reported', async () => {
    const f = await mountFixture({
      tree: { 'src/a.txt': 'a\n', output: { dir: true } },
      rules: [
        { pattern: '**', permission: 'read' },
        { pattern: 'output/**', permission: 'write' },
      ],
    });
    const r = await f.host(
      [
        'mknod output/null c 1 3 && mknod output/disk b 8 0 && mkfifo output/fifo && chmod 4755 output/fifo',
        'stat -c "%F %t:%T %a" output/null output/disk output/fifo',
        'head -c1 output/null 2>&1 | sed "s/.*: //"',
        'mknod src/dev c 1 3 2>&1 | sed "s/.*: //"',
        'echo x > output/plain && chmod 4755 output/plain',
      ].join('\n'),
    );
    expect(r.stdout).toBe(
      'character special file 1:3 644\nblock special file 8:0 644\nfifo 0:0 4755\nPermission denied\nPermission denied\n',
    );
    // The sandbox user has no CAP_MKNOD: EPERM, like on any disk; a FIFO is fine.
    const s = await f.sandbox(
      'mknod output/d2 c 1 3 2>&1 | sed "s/.*: //"; mkfifo output/f2 && echo fifo-ok',
    );
    expect(s.stdout).toBe('Operation not permitted\nfifo-ok\n');
    const result = await f.worker.client.request('commit', { mode: 'detect-conflicts' });
    expect(result.skipped).toEqual(
      expect.arrayContaining([
        {
          path: '/output/null',
          reason: expect.stringMatching(/^character device: never written/) as unknown,
        },
        { path: '/output/disk', reason: expect.stringMatching(/^block device: never written/) as unknown },
        { path: '/output/fifo', reason: expect.stringMatching(/^FIFO/) as unknown },
      ]),
    );
    expect(result.changed).toEqual([
      { path: '/output/plain', reason: 'set-uid/set-gid bits removed (mode 4755 written as 755)' },
    ]);
    const { readdir, stat } = await import('node:fs/promises');
    expect((await readdir(join(f.lower, 'output'))).sort()).toEqual(['plain']);
    expect((await stat(join(f.lower, 'output/plain'))).mode & 0o7777).toBe(0o755);
    // still there in the sandbox's view
    expect((await f.host('stat -c %F output/null')).stdout).toBe('character special file\n');
  });
});
