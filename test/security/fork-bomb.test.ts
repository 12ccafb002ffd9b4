// `ulimit -u 100; for i in $(seq 1000); do sleep 30 & done` started 1000 processes: no
// process limit by default, and the kernel skips RLIMIT_NPROC for host root. Now every sandbox has a pids
// cgroup limit by default (1024, DEFAULT_RESOURCES), and since sandbox processes are no longer host root,
// RLIMIT_NPROC applies as well.
import { describe, expect, it } from 'vitest';
import { DEFAULT_RESOURCES } from '@agentfense/protocol';
import { useSandbox } from '../helpers/security-control.js';

describe('a fork bomb is capped by default', () => {
  const sandbox = useSandbox();

  it('inspect reports the default process limit as enforced by a pids cgroup', async () => {
    const info = await sandbox().cp.getSandbox(sandbox().id);
    expect(DEFAULT_RESOURCES.pidsLimit).toBe(1024);
    expect(info.limits?.pidsLimit).toBe(1024);
    expect(info.limits?.mechanism).toMatch(/^cgroup-v[12]$/);
  });

  it('1100 background sleeps: no more than the default 1024 processes run', async () => {
    const r = await sandbox().run(
      // Python forks until the kernel refuses (a shell would abort or retry on EAGAIN), then counts.
      `python3 -c "
import os, time
n = 0
for i in range(1100):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    n += 1
print(len([p for p in os.listdir('/proc') if p.isdigit()]))
"`,
      120_000,
    );
    const count = Number(r.out.trim());
    expect(count).toBeGreaterThan(100);
    expect(count).toBeLessThanOrEqual(1024);
  }, 180_000);

  it('ulimit -u now holds too (RLIMIT_NPROC applies to a non-root host uid)', async () => {
    // The same rule as `ulimit -u 100` in a shell, set from Python so a refused fork is counted rather
    // than aborting the shell (bash gives up on a fork interrupted by a signal, and would print nothing).
    const r = await sandbox().run(
      `python3 -c "
import os, resource, time
resource.setrlimit(resource.RLIMIT_NPROC, (100, 100))
started = refused = 0
for i in range(300):
    try:
        pid = os.fork()
    except OSError:
        refused += 1
        continue
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    started += 1
print(started, refused, len([p for p in os.listdir('/proc') if p.isdigit()]))
"`,
      120_000,
    );
    const [started, refused, running] = r.out.trim().split(' ').map(Number);
    expect(refused).toBeGreaterThan(0);
    expect(started).toBeGreaterThan(50);
    expect(running).toBeLessThanOrEqual(100);
  }, 180_000);
});
