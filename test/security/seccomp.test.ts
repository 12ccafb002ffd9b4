// `grep Seccomp /proc/self/status` inside printed 0: no seccomp filter. Now every command
// runs under the shared deny list (@agentfense/protocol runtime/seccomp.ts, compiled with libseccomp):
// mount, new user namespaces, keyrings, bpf and the rest fail with EPERM (never a kill, so tools degrade
// gracefully), while ordinary work — and ptrace of the sandbox's own processes — goes on.
import { describe, expect, it } from 'vitest';
import { useSandbox } from '../helpers/security-control.js';

/** Python calling raw syscalls by number (x86-64) and printing the errno name of each. */
const SYSCALLS = `
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    print(name, 'ok' if r >= 0 else errno.errorcode[ctypes.get_errno()])
call('keyctl', 250, 0, 0, 0, 0)
call('add_key', 248, 0, 0, 0, 0, 0)
call('bpf', 321, 0, 0, 0)
call('perf_event_open', 298, 0, 0, -1, -1, 0)
call('userfaultfd', 323, 0)
call('unshare_user', 272, 0x10000000)
call('unshare_net', 272, 0x40000000)
call('setns', 308, 0, 0)
call('clone3', 435, 0, 0)
call('open_by_handle_at', 304, 0, 0, 0)
call('kexec_load', 246, 0, 0, 0, 0)
call('init_module', 175, 0, 0, 0)
call('mount', 165, 0, 0, 0, 0, 0)
call('umount2', 166, 0, 0)
call('pivot_root', 155, 0, 0)
call('fsopen', 430, 0, 0)
call('io_uring_setup', 425, 1, 0)
call('getpid', 39)
`;

describe('seccomp deny list in the bwrap runtime', () => {
  const sandbox = useSandbox();

  it('every command runs under a seccomp filter', async () => {
    const r = await sandbox().run('grep -E "^Seccomp:" /proc/self/status');
    expect(r.out).toBe('Seccomp:\t2\n');
  });

  it('denied syscalls fail with EPERM (clone3 with ENOSYS); others work', async () => {
    const r = await sandbox().run(`python3 -c "${SYSCALLS.replaceAll('"', '\\"')}"`);
    expect(r.err).toBe('');
    const results: Record<string, string | undefined> = Object.fromEntries(
      r.out
        .trim()
        .split('\n')
        .map((l): [string, string] => [l.split(' ')[0] ?? '', l.split(' ')[1] ?? '']),
    );
    for (const name of [
      'keyctl',
      'add_key',
      'bpf',
      'perf_event_open',
      'userfaultfd',
      'unshare_user',
      'unshare_net',
      'setns',
      'open_by_handle_at',
      'kexec_load',
      'init_module',
      'mount',
      'umount2',
      'pivot_root',
      'fsopen',
      'io_uring_setup',
    ]) {
      expect([name, results[name]]).toEqual([name, 'EPERM']);
    }
    expect(results['clone3']).toBe('ENOSYS');
    expect(results['getpid']).toBe('ok');
  });

  it('tools degrade gracefully: mount and unshare -U report the denial, the shell goes on', async () => {
    const r = await sandbox().run(
      'mount -t tmpfs none /tmp 2>&1; echo mount=$?; unshare -U true 2>&1; echo unshare=$?; echo still-here',
    );
    expect(r.out).toMatch(/mount=\d+\n/);
    expect(r.out).not.toMatch(/mount=0\n/);
    expect(r.out).toMatch(/unshare: unshare failed: Operation not permitted\nunshare=1\nstill-here\n$/);
  });

  it('ptrace reaches the sandbox own processes only, never one outside it', async () => {
    // The test runner's pid does not exist in the sandbox's pid namespace.
    const outside = process.pid;
    const r = await sandbox().run(
      `python3 -c "
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
child = os.fork()
if child == 0:
    time.sleep(5); os._exit(0)
r = libc.ptrace(16, child, 0, 0)  # PTRACE_ATTACH own child
print('own', 'ok' if r == 0 else errno.errorcode[ctypes.get_errno()])
os.kill(child, 9)
r = libc.ptrace(16, ${outside}, 0, 0)
print('outside', 'ok' if r == 0 else errno.errorcode[ctypes.get_errno()])
"`,
    );
    expect(r.out).toBe('own ok\noutside ESRCH\n');
  });
});
