// What a sandboxed command must not reach (contract §4, §6): the control plane's data directory, database,
// sockets and environment, a TCP port the host listens on when the network is off, and other processes'
// /proc entries and memory.
import { createServer } from 'node:net';
import type { AddressInfo, Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Sandbox } from '@agentfense/control';
import { assertCleanAndRemove, makeDirs } from '../helpers/control-fixtures.js';
import type { TestDirs } from '../helpers/control-fixtures.js';

describe('escapes', () => {
  let dirs: TestDirs;
  let sb: Sandbox;
  let server: Server;
  let port: number;
  let connections = 0;

  beforeAll(async () => {
    dirs = await makeDirs();
    process.env.AF_CONTROL_SECRET = 'control-plane-secret-value';
    sb = await Sandbox.fromLocal(dirs.repo, { dataDir: dirs.dataDir });
    server = createServer((socket) => {
      connections++;
      socket.end('hello from the host\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    delete process.env.AF_CONTROL_SECRET;
    server?.close();
    await sb?.destroy();
    await assertCleanAndRemove(dirs);
  });

  it('cannot see the data directory, the database or the worker sockets', async () => {
    const r = await sb.run(
      `ls ${dirs.dataDir} 2>&1; ls ${dirs.root} 2>&1; test -e ${dirs.dataDir}/agentfense.db && echo DB-VISIBLE`,
    );
    expect(r.stdout.toString()).not.toContain('DB-VISIBLE');
    expect(r.stdout.toString()).toMatch(/No such file or directory[^]*No such file or directory/);
    // Paths under the data directory appear only as the sources of two binds: the FUSE view at
    // /workspace and the sandbox's prepared /etc (read-only); nothing else of it is reachable.
    const mountinfo = (await sb.run('cat /proc/self/mountinfo')).stdout.toString().split('\n');
    for (const line of mountinfo.filter((l) => l.includes(dirs.dataDir))) {
      const [, , , , target, options] = line.split(' ');
      expect(['/workspace', '/etc']).toContain(target);
      if (target === '/etc') expect(options?.split(',')).toContain('ro');
    }
    // No Unix socket file anywhere, and no socket fd but the command's own stdout/stderr.
    const files = await sb.run('find / -xdev -type s 2>/dev/null');
    expect(files.stdout.toString()).toBe('');
    // An argv, no shell: a shell's own redirections park copies of stdout on fds >= 10.
    const fds = await sb.run([
      'find',
      '/proc',
      '-maxdepth',
      '3',
      '-path',
      '/proc/[0-9]*/fd/*',
      '-printf',
      '%p %l\n',
    ]);
    const socketFds = fds.stdout
      .toString()
      .split('\n')
      .filter((l) => l.includes('socket:'))
      .map((l) => /\/fd\/(\d+) /.exec(l)?.[1]);
    // The listing works (it shows this command's own descriptors); with a bwrap per command its stdout
    // and stderr are the control plane's socketpairs, through the launcher (execLauncher) af-init's pipes,
    // and af-init's own connection is not listable (it is not dumpable).
    expect(fds.stdout.toString()).toMatch(/\/fd\/1 /);
    for (const fd of socketFds) expect(['1', '2']).toContain(fd);
  });

  it('does not inherit the control plane environment', async () => {
    const r = await sb.run('env; cat /proc/1/environ 2>/dev/null | tr "\\0" "\\n"');
    expect(r.stdout.toString()).not.toContain('control-plane-secret-value');
    expect(r.stdout.toString()).not.toContain('AGENTFENSE');
  });

  it('cannot reach a host TCP port when the network is off', async () => {
    const r = await sb.run(
      `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3' 2>&1; echo status=$?; ls /sys/class/net 2>/dev/null`,
    );
    expect(r.stdout.toString()).not.toContain('hello from the host');
    expect(r.stdout.toString()).toMatch(/status=[1-9]/);
    expect(connections).toBe(0);
  });

  it("cannot read other processes' /proc entries or memory", async () => {
    const host = process.pid;
    const r = await sb.run(
      `ls /proc | grep -c '^[0-9]'; cat /proc/${host}/environ 2>&1 | head -c 200; head -c 16 /proc/${host}/mem 2>&1 | head -c 200; echo; ` +
        `cat /proc/1/cmdline | tr '\\0' ' '`,
    );
    const out = r.stdout.toString();
    const [count] = out.split('\n');
    expect(Number(count)).toBeLessThan(10); // only this command's own processes
    expect(out).not.toContain('control-plane-secret-value');
    expect(out).not.toMatch(/node|vitest/);
  });
});
