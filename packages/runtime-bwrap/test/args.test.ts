// buildBwrapArgs: the exact argv (inline snapshot) and the security properties it must keep (targeted).
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '@agentfense/protocol';
import { buildBwrapArgs } from '../src/exec/args.js';
import type { BwrapSpec, SystemMount } from '../src/exec/args.js';

const MOUNTS: SystemMount[] = [
  { kind: 'ro-bind', source: '/usr', dest: '/usr' },
  { kind: 'symlink', target: 'usr/bin', dest: '/bin' },
  { kind: 'ro-bind', source: '/state/bwrap/etc', dest: '/etc' },
];
const spec = (over: Partial<BwrapSpec> = {}): BwrapSpec => ({
  workspaceHostPath: '/srv/af/ws/sb_1',
  systemMounts: MOUNTS,
  command: 'echo hi',
  ...over,
});

/** The value following `flag` at each of its occurrences. */
function valuesOf(args: readonly string[], flag: string): string[] {
  return args.flatMap((a, i) => (a === flag ? [args[i + 1] ?? ''] : []));
}

describe('buildBwrapArgs', () => {
  it('builds the full argv for a shell command', () => {
    expect(buildBwrapArgs(spec())).toMatchInlineSnapshot(`
      [
        "--die-with-parent",
        "--new-session",
        "--unshare-user",
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--disable-userns",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--unshare-net",
        "--hostname",
        "agentfense",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/bin",
        "/bin",
        "--ro-bind",
        "/state/bwrap/etc",
        "/etc",
        "--proc",
        "/proc",
        "--ro-bind",
        "/proc/sys",
        "/proc/sys",
        "--ro-bind-try",
        "/proc/sysrq-trigger",
        "/proc/sysrq-trigger",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--dir",
        "/tmp/home",
        "--bind",
        "/srv/af/ws/sb_1",
        "/workspace",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--setenv",
        "HOME",
        "/tmp/home",
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--setenv",
        "TERM",
        "dumb",
        "--chdir",
        "/workspace",
        "--cap-drop",
        "ALL",
        "--",
        "/bin/sh",
        "-c",
        "echo hi",
      ]
    `);
  });

  it('builds an argv command with the cgroup handshake and network on: only those parts differ', () => {
    const shell = buildBwrapArgs(spec());
    const args = buildBwrapArgs(
      spec({
        command: ['ls', '-la'],
        joinsNetns: true,
        cgroupHandshake: { infoFd: 3, blockFd: 4 },
        cwd: '/workspace/src',
      }),
    );
    // The sandbox's namespace is joined, not a fresh one; the handshake fds come last before the command.
    const expected = shell
      .map((a, i) => (shell[i - 1] === '--chdir' ? '/workspace/src' : a))
      .filter((a) => a !== '--unshare-net');
    const end = expected.indexOf('--');
    expected.splice(end, expected.length - end, '--info-fd', '3', '--block-fd', '4', '--', 'ls', '-la');
    expect(args).toEqual(expected);
  });

  it('always isolates: die-with-parent, new session, user/pid/ipc/uts/cgroup namespaces, no caps', () => {
    const args = buildBwrapArgs(spec({ joinsNetns: true }));
    for (const flag of [
      '--die-with-parent',
      '--new-session',
      '--unshare-user',
      '--disable-userns',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-cgroup-try',
    ]) {
      expect(args).toContain(flag);
    }
    expect(valuesOf(args, '--uid')).toEqual(['1000']);
    expect(valuesOf(args, '--gid')).toEqual(['1000']);
    expect(valuesOf(args, '--cap-drop')).toEqual(['ALL']);
    expect(valuesOf(args, '--proc')).toEqual(['/proc']);
    expect(valuesOf(args, '--dev')).toEqual(['/dev']);
    expect(valuesOf(args, '--tmpfs')).toEqual(['/tmp']);
    expect(valuesOf(args, '--hostname')).toEqual(['agentfense']);
  });

  it("unshares the network unless it stays in the sandbox's own namespace (a network policy's)", () => {
    expect(buildBwrapArgs(spec())).toContain('--unshare-net');
    expect(buildBwrapArgs(spec({ joinsNetns: false }))).toContain('--unshare-net');
    expect(buildBwrapArgs(spec({ joinsNetns: true }))).not.toContain('--unshare-net');
  });

  it("binds the sandbox's own devpts over /dev/pts, after --dev and with devices allowed (no nodev)", () => {
    const args = buildBwrapArgs(spec({ devptsHostPath: '/run/af/sb_1.dev/pts' }));
    const at = args.indexOf('--dev-bind');
    expect(args.slice(at, at + 3)).toEqual(['--dev-bind', '/run/af/sb_1.dev/pts', '/dev/pts']);
    expect(at).toBeGreaterThan(args.indexOf('--dev'));
    expect(valuesOf(args, '--bind')).not.toContain('/run/af/sb_1.dev/pts');
    expect(buildBwrapArgs(spec())).not.toContain('--dev-bind');
  });

  it('binds the workspace read-write at /workspace, as the last mount', () => {
    const args = buildBwrapArgs(spec());
    const at = args.indexOf('--bind');
    expect(args.slice(at, at + 3)).toEqual(['--bind', '/srv/af/ws/sb_1', '/workspace']);
    expect(args.lastIndexOf('--bind')).toBe(at);
    for (const later of ['--ro-bind', '--ro-bind-try', '--tmpfs', '--proc', '--dev', '--symlink', '--dir']) {
      expect(args.lastIndexOf(later)).toBeLessThan(at);
    }
    expect(valuesOf(args, '--ro-bind')).not.toContain('/srv/af/ws/sb_1');
  });

  it('clears the environment before setting exactly the base and caller variables', () => {
    const args = buildBwrapArgs(spec({ env: { FOO: 'bar', PATH: '/custom' } }));
    const clear = args.indexOf('--clearenv');
    expect(clear).toBeGreaterThan(0);
    expect(args.indexOf('--setenv')).toBeGreaterThan(clear);
    const names = valuesOf(args, '--setenv');
    expect(names).toEqual(['PATH', 'HOME', 'LANG', 'TERM', 'FOO']);
    const path = args.indexOf('PATH');
    expect(args[path + 1]).toBe('/custom');
  });

  it('never copies the host environment', () => {
    process.env['AF_ARGS_TEST_SECRET'] = 'host-secret-value';
    try {
      const args = buildBwrapArgs(spec());
      expect(args.join('\0')).not.toContain('host-secret-value');
      expect(args).not.toContain('AF_ARGS_TEST_SECRET');
    } finally {
      delete process.env['AF_ARGS_TEST_SECRET'];
    }
  });

  it('defaults cwd to /workspace and accepts absolute normalised paths', () => {
    expect(valuesOf(buildBwrapArgs(spec()), '--chdir')).toEqual(['/workspace']);
    expect(valuesOf(buildBwrapArgs(spec({ cwd: '/' })), '--chdir')).toEqual(['/']);
    expect(valuesOf(buildBwrapArgs(spec({ cwd: '/workspace/a b' })), '--chdir')).toEqual(['/workspace/a b']);
  });

  it.each([
    'workspace',
    '',
    '/workspace/../etc',
    '/workspace/./x',
    '/workspace//x',
    '/workspace/',
    'a/../b',
    '/x\0y',
  ])('rejects cwd %j', (cwd) => {
    expect(() => buildBwrapArgs(spec({ cwd }))).toThrow(InvalidArgumentError);
  });

  it.each(['1ABC', 'A-B', 'A=B', '', 'A B', 'Ä'])('rejects env name %j', (name) => {
    expect(() => buildBwrapArgs(spec({ env: { [name]: 'x' } }))).toThrow(InvalidArgumentError);
  });

  it('rejects NUL bytes in env values and commands, and empty commands', () => {
    expect(() => buildBwrapArgs(spec({ env: { A: 'x\0y' } }))).toThrow(InvalidArgumentError);
    expect(() => buildBwrapArgs(spec({ command: ['ls', 'a\0b'] }))).toThrow(InvalidArgumentError);
    expect(() => buildBwrapArgs(spec({ command: [] }))).toThrow(InvalidArgumentError);
    expect(() => buildBwrapArgs(spec({ command: [''] }))).toThrow(InvalidArgumentError);
    expect(() => buildBwrapArgs(spec({ command: '' }))).toThrow(InvalidArgumentError);
  });

  it('runs a string through /bin/sh -c and an argv as is, both after `--`', () => {
    const shell = buildBwrapArgs(spec({ command: 'echo "$HOME"; ls' }));
    expect(shell.slice(shell.indexOf('--'))).toEqual(['--', '/bin/sh', '-c', 'echo "$HOME"; ls']);
    const argv = buildBwrapArgs(spec({ command: ['--help', '$HOME', 'a b'] }));
    expect(argv.slice(argv.indexOf('--'))).toEqual(['--', '--help', '$HOME', 'a b']);
  });

  it('is pure: same spec, same argv; the spec is not modified', () => {
    const s = spec({ env: { A: '1' } });
    const frozen = JSON.stringify(s);
    expect(buildBwrapArgs(s)).toEqual(buildBwrapArgs(s));
    expect(JSON.stringify(s)).toBe(frozen);
  });
});
