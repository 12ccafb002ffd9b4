// `echo 46 > /proc/sys/fs/lease-break-time` inside changed the HOST's value, and
// /proc/sys/kernel/core_pattern was writable (a `|program` there runs as host root on the next crash).
// Now /proc/sys and /proc/sysrq-trigger are read-only inside, the sandbox user is not host root, and
// /sys is absent.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { useSandbox } from '../helpers/security-control.js';

describe('host sysctls cannot be changed from a sandbox', () => {
  const sandbox = useSandbox();

  it('writing /proc/sys/fs/lease-break-time fails and the host value stays', async () => {
    const before = await readFile('/proc/sys/fs/lease-break-time', 'utf8');
    const next = String(Number(before.trim()) + 1);
    const r = await sandbox().run(`echo ${next} > /proc/sys/fs/lease-break-time; echo rc=$?`);
    expect(r.out).toBe('rc=2\n');
    expect(r.err).toMatch(/lease-break-time: (Read-only file system|Permission denied)/);
    expect(await readFile('/proc/sys/fs/lease-break-time', 'utf8')).toBe(before);
  });

  it('core_pattern, other sysctls and sysrq-trigger are not writable; /sys is absent', async () => {
    const pattern = await readFile('/proc/sys/kernel/core_pattern', 'utf8');
    const r = await sandbox().run(
      [
        "echo '|/tmp/evil' > /proc/sys/kernel/core_pattern 2>/dev/null; echo core=$?",
        'echo 1 > /proc/sys/vm/drop_caches 2>/dev/null; echo drop=$?',
        'echo 1 > /proc/sys/fs/protected_symlinks 2>/dev/null; echo fs=$?',
        'if [ -e /proc/sysrq-trigger ]; then echo b > /proc/sysrq-trigger 2>/dev/null; echo sysrq=$?; else echo sysrq=absent; fi',
        'grep -E " /proc/sys " /proc/self/mountinfo | grep -c " ro,"',
        'ls /sys 2>/dev/null | wc -l',
      ].join('; '),
    );
    expect(r.out).toMatch(/^core=[12]\ndrop=[12]\nfs=[12]\nsysrq=([12]|absent)\n1\n0\n$/);
    expect(await readFile('/proc/sys/kernel/core_pattern', 'utf8')).toBe(pattern);
  });
});
