import { describe, expect, it } from 'vitest';
import { decodeNamespaceCall, isNamespaceSyscall } from '../../src/fs/caller-syscall.js';

// Lines as /proc/<tid>/syscall shows them on x86-64: "nr arg1 … arg6 sp pc".
const line = (nr: number, ...args: string[]): string =>
  [nr, ...args, ...Array<string>(6 - args.length).fill('0x0'), '0x7ffd809cbbe0', '0x7f063d4d7011'].join(' ');
const CWD = '0xffffff9c'; // AT_FDCWD (-100) as the register shows it
const decode = (text: string): ReturnType<typeof decodeNamespaceCall> => decodeNamespaceCall(text, 0);
// (tid 0: the calls that read the caller's memory, openat2 and bind, find none and answer null)
const cwd = (address: number): { dirfd: number; address: number } => ({ dirfd: -100, address });

describe('decodeNamespaceCall', () => {
  it('names the op and the path arguments of each namespace syscall', async () => {
    expect(await decode(line(83, '0x1000', '0x1ff'))).toEqual({
      op: 'mkdir',
      paths: [cwd(0x1000)],
      openCreate: false,
    });
    expect((await decode(line(258, '0x3', '0x1000', '0x1ff')))?.paths).toEqual([
      { dirfd: 3, address: 0x1000 },
    ]);
    expect((await decode(line(87, '0x1000')))?.op).toBe('unlink');
    expect((await decode(line(84, '0x1000')))?.op).toBe('rmdir');
    expect((await decode(line(263, CWD, '0x1000', '0x0')))?.op).toBe('unlink');
    expect((await decode(line(263, CWD, '0x1000', '0x200')))?.op).toBe('rmdir'); // AT_REMOVEDIR
    expect((await decode(line(133, '0x1000', '0x11a4', '0x0')))?.op).toBe('mknod');
    expect(await decode(line(88, '0x2000', '0x1000'))).toEqual({
      op: 'symlink',
      paths: [cwd(0x1000)],
      openCreate: false,
    });
    expect((await decode(line(266, '0x2000', '0x4', '0x1000')))?.paths).toEqual([
      { dirfd: 4, address: 0x1000 },
    ]);
    expect((await decode(line(85, '0x1000', '0x1b6')))?.op).toBe('create');
  });

  it('rename lists source then destination; link lists the new name first', async () => {
    expect((await decode(line(82, '0x1000', '0x2000')))?.paths).toEqual([cwd(0x1000), cwd(0x2000)]);
    expect(await decode(line(316, '0x3', '0x1000', '0x4', '0x2000', '0x1'))).toEqual({
      op: 'rename',
      paths: [
        { dirfd: 3, address: 0x1000 },
        { dirfd: 4, address: 0x2000 },
      ],
      openCreate: false,
    });
    expect((await decode(line(86, '0x1000', '0x2000')))?.paths).toEqual([cwd(0x2000), cwd(0x1000)]);
    expect((await decode(line(265, CWD, '0x1000', '0x5', '0x2000', '0x0')))?.paths).toEqual([
      { dirfd: 5, address: 0x2000 },
      cwd(0x1000),
    ]);
  });

  it('open counts only with O_CREAT; other syscalls and non-syscall states are nothing', async () => {
    expect(await decode(line(257, CWD, '0x1000', '0x241', '0x1b6'))).toEqual({
      op: 'create',
      paths: [cwd(0x1000)],
      openCreate: true,
    });
    expect((await decode(line(2, '0x1000', '0x41')))?.op).toBe('create');
    expect(await decode(line(257, CWD, '0x1000', '0x1'))).toBeNull(); // O_WRONLY without O_CREAT
    expect(await decode(line(262, CWD, '0x1000', '0x7fff0000', '0x0'))).toBeNull(); // newfstatat
    expect(await decode(line(21, '0x1000', '0x2'))).toBeNull(); // access(W_OK)
    expect(await decode('running')).toBeNull();
    expect(await decode('-1 0x7ffd809cbbe0 0x7f063d4d7011')).toBeNull();
  });

  it('tells a namespace syscall from a stat without decoding it', () => {
    expect(isNamespaceSyscall(line(83, '0x1000', '0x1ff'))).toBe(true);
    expect(isNamespaceSyscall(line(257, CWD, '0x1000', '0x0'))).toBe(true); // decoded later: no O_CREAT
    expect(isNamespaceSyscall(line(262, CWD, '0x1000', '0x7fff0000', '0x100'))).toBe(false); // lstat
    expect(isNamespaceSyscall('running')).toBe(false);
  });
});
