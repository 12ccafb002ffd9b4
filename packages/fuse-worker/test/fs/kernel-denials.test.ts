import { describe, expect, it } from 'vitest';
import { classify } from '../../src/fs/kernel-denials.js';

// Lines as /proc/<pid>/syscall shows them on x86-64: "nr arg1 … arg6 sp pc".
const line = (nr: number, ...args: string[]): string =>
  [nr, ...args, ...Array<string>(6 - args.length).fill('0x0'), '0x7ffd809cbbe0', '0x7f063d4d7011'].join(' ');

describe('classify', () => {
  it('reads the access mode of open and openat', () => {
    expect(classify(line(257, '0xffffff9c', '0x5612a9a2e928', '0x241', '0x1b6'))).toEqual({
      op: 'open',
      access: 'write',
    }); // > file
    expect(classify(line(257, '0xffffff9c', '0x5632379d44d0', '0x441'))).toEqual({
      op: 'open',
      access: 'write',
    }); // >> file
    expect(classify(line(257, '0xffffff9c', '0x7fff116b7f5b', '0x0'))).toEqual({
      op: 'open',
      access: 'read',
    }); // cat
    expect(classify(line(2, '0x7fff116b7f5b', '0x2'))).toEqual({ op: 'open', access: 'write' }); // O_RDWR
    expect(classify(line(2, '0x7fff116b7f5b', '0x200'))).toEqual({ op: 'open', access: 'write' }); // O_TRUNC alone
  });

  it('creat and truncate are writes; O_PATH, stat-like calls and non-syscall states are nothing', () => {
    expect(classify(line(85, '0x7fff116b7f5b', '0x1b6'))).toEqual({ op: 'open', access: 'write' });
    expect(classify(line(76, '0x7fff116b7f5b', '0x0'))).toEqual({ op: 'truncate', access: 'write' });
    expect(classify(line(257, '0xffffff9c', '0x7fff116b7f5b', '0x200000'))).toBeNull(); // O_PATH
    expect(classify(line(262, '0xffffff9c', '0x7fff116b7f5b', '0x7fff0000', '0x0'))).toBeNull(); // newfstatat
    expect(classify('running')).toBeNull();
    expect(classify('-1 0x7ffd809cbbe0 0x7f063d4d7011')).toBeNull();
  });

  it('ignores garbage in the upper half of a flags register', () => {
    expect(classify(line(257, '0xffffff9c', '0x1', '0xdead000000000000'))).toEqual({
      op: 'open',
      access: 'read',
    });
  });
});
