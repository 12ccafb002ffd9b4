// The docker side of pty-bound.test.ts. ptys are counted per host (kernel.pty.max), and the engine's
// default /dev/pts is a devpts instance without `max=`: container A opening ptys until the kernel refused
// held every pty the host's non-initial devpts instances share, and container B got ENOSPC for its first.
// Each container's /dev/pts is now an anonymous volume of the engine's local driver that is a devpts with
// max=SANDBOX_PTY_MAX: A runs out of its own and B still gets one.
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ControlPlane } from '@agentfense/control';
import { SANDBOX_PTY_MAX } from '@agentfense/protocol';
import { closePlane, makeDirs } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

const docker = inject('docker');

/**
 * perl in the base image: opens pty masters (one descriptor each; the shell raises the descriptor limit
 * to its hard limit so only the ptys can run out) until the kernel refuses one, then holds them.
 */
const EXHAUST =
  `ulimit -n "$(ulimit -Hn)"; perl -e 'my @held; while (open(my $m, "+<", "/dev/ptmx")) { push @held, $m } ` +
  `my $why = $!{ENOSPC} ? "ENOSPC" : $! + 0; open(my $f, ">", "/tmp/held.tmp"); ` +
  `print $f scalar(@held) . " $why"; close($f); rename("/tmp/held.tmp", "/tmp/held"); sleep 60'`;
/** perl: one pty, and its number (TIOCGPTN), or the errno. */
const TAKE_ONE =
  `perl -e 'open(my $m, "+<", "/dev/ptmx") or do { print "pty ", ($!{ENOSPC} ? "ENOSPC" : $! + 0), "\\n"; exit }; ` +
  `my $n = pack("L", 0); ioctl($m, 0x80045430, $n) or die "TIOCGPTN: $!"; print "pty ok ", unpack("L", $n), "\\n"'`;

describe.skipIf(docker.unavailable !== null)(
  `docker sandboxes' ptys are bounded${docker.unavailable === null ? '' : ` (skipped: ${docker.unavailable})`}`,
  () => {
    let dirs: TestDirs;
    let cp: ControlPlane;
    let a: string;
    let b: string;
    const running: Promise<unknown>[] = [];
    const savedHost = process.env['DOCKER_HOST'];

    beforeAll(async () => {
      process.env['DOCKER_HOST'] = docker.dockerHost ?? '';
      dirs = await makeDirs();
      cp = await ControlPlane.open({ dataDir: dirs.dataDir, dockerPoolSize: 0 });
      const { id: codebaseId } = await cp.linkCodebase({ path: dirs.repo });
      ({ id: a } = await cp.createSandbox({ codebaseId, preset: 'agent-safe', runtime: 'docker' }));
      ({ id: b } = await cp.createSandbox({ codebaseId, preset: 'agent-safe', runtime: 'docker' }));
      await Promise.all([cp.startSandbox(a), cp.startSandbox(b)]);
    }, 180_000);

    afterAll(async () => {
      await Promise.all(running);
      await closePlane(cp, dirs);
      if (savedHost === undefined) delete process.env['DOCKER_HOST'];
      else process.env['DOCKER_HOST'] = savedHost;
    }, 120_000);

    it('container A opens ptys until the kernel refuses: it stops at its own bound, and container B still gets one', async () => {
      running.push(cp.run(a, EXHAUST, { timeoutMs: 90_000 }).catch(() => undefined));
      // A holds the host's ptys (without the bound, all of them) until it is stopped, whatever happens here.
      try {
        let held = '';
        for (let i = 0; i < 600 && held === ''; i++) {
          held = (await cp.run(a, 'cat /tmp/held 2>/dev/null || true')).stdout;
          if (held === '') await sleep(100);
        }
        const [count, reason] = held.split(' ');
        // A really ran out of ptys (not descriptors, not a crash of the script) ...
        expect(reason, held).toBe('ENOSPC');
        const r = await cp.run(b, TAKE_ONE);
        expect(r.stderr).toBe('');
        expect(r.stdout, `A held: ${held}`).toBe('pty ok 0\n');
        // ... at its own bound.
        expect(Number(count), held).toBe(SANDBOX_PTY_MAX);
        // /dev/pts is the bounded instance, the only one there.
        const mounts = (await cp.run(b, 'grep " /dev/pts " /proc/self/mountinfo')).stdout.trim().split('\n');
        expect(mounts).toHaveLength(1);
        expect(mounts[0]).toMatch(new RegExp(`\\bmax=${String(SANDBOX_PTY_MAX)}\\b`));
      } finally {
        await cp.stopSandbox(a);
      }
    }, 120_000);

    it('the devpts volume goes with its container', async () => {
      const dockerCli = (args: string[]) =>
        execa('docker', args, { reject: false, env: { DOCKER_HOST: docker.dockerHost ?? '' } });
      const inspect = await dockerCli([
        'inspect',
        '--format',
        '{{range .Mounts}}{{if eq .Destination "/dev/pts"}}{{.Type}} {{.Name}}{{end}}{{end}}',
        `agentfense-${b}`,
      ]);
      const [type, volume] = inspect.stdout.trim().split(' ');
      expect(type, inspect.stderr).toBe('volume');
      expect((await dockerCli(['volume', 'inspect', volume ?? ''])).exitCode).toBe(0);
      await cp.destroySandbox(b);
      const after = await dockerCli(['volume', 'inspect', volume ?? '']);
      expect(after.exitCode).not.toBe(0);
      expect(after.stderr).toMatch(/no such volume/i);
    }, 60_000);
  },
);
