// Parsing the host's view of a container: /proc/PID/cgroup, cgroup mounts in mountinfo, the OOM counter.
import { describe, expect, it } from 'vitest';
import { parseCgroupMounts, parseOomKills, parseProcCgroup } from '../src/container/cgroup.js';

describe('cgroup parsing', () => {
  it('reads controllers and paths of /proc/PID/cgroup (v1 and v2 lines)', () => {
    expect(
      parseProcCgroup(
        '8:pids:/docker/abc\n4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/docker/abc\n',
      ),
    ).toEqual([
      { controllers: ['pids'], path: '/docker/abc' },
      { controllers: ['memory'], path: '/docker/abc' },
      { controllers: ['cpu', 'cpuacct'], path: '/docker/abc' },
      { controllers: [], path: '/docker/abc' },
    ]);
  });

  it('finds v1 and v2 cgroup mounts in mountinfo, unescaping paths', () => {
    const mountinfo = [
      '30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw',
      '31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory',
      '32 25 0:28 /nested /sys/fs/cgroup/cpu\\040x rw - cgroup cgroup rw,cpu,cpuacct',
      '33 25 0:29 / /proc rw - proc proc rw',
    ].join('\n');
    expect(parseCgroupMounts(mountinfo)).toEqual([
      { version: 2, mountPoint: '/sys/fs/cgroup/unified', root: '/', controllers: [] },
      { version: 1, mountPoint: '/sys/fs/cgroup/memory', root: '/', controllers: ['rw', 'memory'] },
      {
        version: 1,
        mountPoint: '/sys/fs/cgroup/cpu x',
        root: '/nested',
        controllers: ['rw', 'cpu', 'cpuacct'],
      },
    ]);
  });

  it('reads oom_kill from memory.oom_control (v1) and memory.events (v2)', () => {
    expect(parseOomKills('oom_kill_disable 0\nunder_oom 0\noom_kill 3\n')).toBe(3);
    expect(parseOomKills('low 0\nhigh 0\nmax 5\noom 2\noom_kill 1\n')).toBe(1);
    expect(parseOomKills('oom_kill_disable 0\n')).toBeNull();
  });
});
