// A Docker sandbox's processes, seen from the host, run under a uid no host user has,
// with the default limits (pids 1024, memory, CPU) and the shared seccomp deny list (io_uring, which
// Docker's own default profile allows on this engine, is refused).
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DEFAULT_RESOURCES } from '@agentfense/protocol';
import { sandboxProcessesWith } from '../runtime/contract.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = `${root}packages/control/bin/agentfense.js`;
const demo = `${root}examples/demo-repo`;
const docker = inject('docker');

describe.skipIf(docker.dockerHost === null)(
  `docker sandboxes run as nobody the host knows, limited and filtered (${docker.unavailable ?? 'engine up'})`,
  () => {
    let scratch: string;
    const env = (): Record<string, string> => ({
      DOCKER_HOST: docker.dockerHost ?? '',
      AGENTFENSE_DATA_DIR: join(scratch, 'data'),
    });
    beforeAll(async () => {
      scratch = await mkdtemp(join(tmpdir(), 'af-docker-uid-'));
    });
    afterAll(async () => {
      await rm(scratch, { recursive: true, force: true });
    });

    it('host ps: the agent runs under a uid with no host account', async () => {
      const marker = `af-uid-${randomUUID()}`;
      const run = execa(
        process.execPath,
        [bin, 'run', demo, '--runtime', 'docker', '--', 'sh', '-c', `sleep 2; : ${marker}`],
        { reject: false, env: env() },
      );
      let pids: number[] = [];
      const deadline = Date.now() + 60_000;
      while (pids.length === 0 && Date.now() < deadline && run.exitCode === null) {
        pids = await sandboxProcessesWith(marker);
        if (pids.length === 0) await sleep(50);
      }
      const status =
        pids.length === 0 ? '' : await readFile(`/proc/${String(pids[0])}/status`, 'utf8').catch(() => '');
      const finished = await run;
      expect(finished.exitCode, finished.stderr).toBe(0);
      expect(pids.length, 'the sandbox process was never seen on the host').toBeGreaterThan(0);
      const uid = /^Uid:\s+(\d+)/m.exec(status)?.[1] ?? '';
      expect(uid).toMatch(/^[1-9]\d*$/);
      const passwd = await readFile('/etc/passwd', 'utf8');
      const owner = passwd.split('\n').find((line) => line.split(':')[2] === uid);
      expect(owner, `host uid ${uid} belongs to a host account`).toBeUndefined();
    });

    it('default pids, memory and CPU limits, and the shared seccomp filter, without any flag', async () => {
      const script = [
        'cat /sys/fs/cgroup/pids/pids.max',
        'cat /sys/fs/cgroup/memory/memory.limit_in_bytes',
        'cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us',
        'grep "^Seccomp:" /proc/self/status',
        // io_uring_setup (x86-64 nr 425) with a NULL params pointer: EFAULT if allowed, EPERM if filtered.
        `perl -e 'syscall(425, 1, 0); print "io_uring: $!\\n"'`,
        // unshare(CLONE_NEWUSER) is refused by the filter, not just by missing capabilities.
        `perl -e 'syscall(272, 0x10000000); print "unshare: $!\\n"'`,
      ].join('; ');
      const r = await execa(
        process.execPath,
        [bin, 'run', demo, '--runtime', 'docker', '--', 'sh', '-c', script],
        {
          reject: false,
          env: env(),
        },
      );
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stdout.split('\n')).toEqual([
        String(DEFAULT_RESOURCES.pidsLimit),
        String(DEFAULT_RESOURCES.memoryBytes),
        String(DEFAULT_RESOURCES.cpuQuota),
        'Seccomp:\t2',
        'io_uring: Operation not permitted',
        'unshare: Operation not permitted',
      ]);
    });
  },
);
