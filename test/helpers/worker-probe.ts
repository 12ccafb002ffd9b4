// Exact errnos from real syscalls: a small python3 program (python's os module maps one call to one
// syscall and reports errno names) runs a list of operations on the mount and prints each outcome as
// 'ok', 'ok:<value>' or the errno name. Run it through a fixture's `sandbox` or `host` runner.
import type { MountedFixture, RunResult } from './worker-fixture.js';

/** One operation; paths are relative to the mount's root (the runner's cwd). */
export type ProbeOp =
  | readonly ['stat' | 'lstat' | 'readlink' | 'listdir' | 'rmdir' | 'unlink' | 'statvfs', string]
  | readonly ['access', string, 'F' | 'R' | 'W' | 'X']
  | readonly ['read' | 'openw' | 'openrw' | 'opentrunc' | 'create' | 'mkdir' | 'mkfifo', string]
  | readonly ['truncate' | 'chmod' | 'utime' | 'chown' | 'setxattr' | 'getxattr' | 'listxattr', string]
  | readonly ['symlink', string, string]
  | readonly ['rename' | 'link', string, string]
  | readonly ['write' | 'rewrite', string, string];

const PROGRAM = String.raw`
import errno, json, os, stat, sys
def run(op):
    kind, a = op[0], op[1]
    if kind == 'stat': return oct(os.stat(a).st_mode)
    if kind == 'lstat': return oct(os.lstat(a).st_mode)
    if kind == 'access':
        m = {'F': os.F_OK, 'R': os.R_OK, 'W': os.W_OK, 'X': os.X_OK}[op[2]]
        return 'yes' if os.access(a, m) else 'no'
    if kind == 'readlink': return os.readlink(a)
    if kind == 'listdir': return ','.join(sorted(os.listdir(a)))
    if kind == 'read':
        fd = os.open(a, os.O_RDONLY)
        try: return os.read(fd, 100).decode('utf-8', 'replace')
        finally: os.close(fd)
    if kind in ('openw', 'openrw', 'opentrunc', 'create'):
        flags = {'openw': os.O_WRONLY, 'openrw': os.O_RDWR, 'opentrunc': os.O_WRONLY | os.O_TRUNC,
                 'create': os.O_WRONLY | os.O_CREAT | os.O_EXCL}[kind]
        os.close(os.open(a, flags, 0o644)); return None
    if kind == 'write':
        fd = os.open(a, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try: os.write(fd, op[2].encode())
        finally: os.close(fd)
        return None
    if kind == 'truncate': os.truncate(a, 1); return None
    if kind == 'chmod': os.chmod(a, 0o640); return None
    if kind == 'utime': os.utime(a, (1000000, 1000000)); return None
    if kind == 'chown': os.chown(a, os.getuid(), os.getgid()); return None
    if kind == 'rewrite':
        fd = os.open(a, os.O_WRONLY)
        try: os.write(fd, op[2].encode())
        finally: os.close(fd)
        return None
    if kind == 'setxattr': os.setxattr(a, 'user.af', b'1'); return None
    if kind == 'getxattr': return os.getxattr(a, 'user.af').decode()
    if kind == 'listxattr': return ','.join(os.listxattr(a))
    if kind == 'mkdir': os.mkdir(a); return None
    if kind == 'mkfifo': os.mkfifo(a); return None
    if kind == 'symlink': os.symlink(op[2], a); return None
    if kind == 'rmdir': os.rmdir(a); return None
    if kind == 'unlink': os.unlink(a); return None
    if kind == 'rename': os.rename(a, op[2]); return None
    if kind == 'link': os.link(a, op[2]); return None
    if kind == 'statvfs':
        s = os.statvfs(a); return 'blocks>0' if s.f_blocks > 0 and s.f_bsize > 0 else 'zero'
    raise Exception('unknown op ' + kind)
out = []
for op in json.load(sys.stdin):
    try:
        v = run(op)
        out.append('ok' if v is None else 'ok:' + str(v))
    except OSError as e:
        out.append(errno.errorcode.get(e.errno, str(e.errno)))
print(json.dumps(out))
`;

/** Runs `ops` in order through `runner` and returns one outcome per op. */
export async function probe(runner: MountedFixture['sandbox'], ops: readonly ProbeOp[]): Promise<string[]> {
  const result: RunResult = await runner(`exec python3 -c '${PROGRAM.replaceAll("'", "'\\''")}'`, {
    stdin: JSON.stringify(ops),
  });
  if (result.code !== 0) throw new Error(`probe failed (${result.code}): ${result.stderr}${result.stdout}`);
  return JSON.parse(result.stdout) as string[];
}

/** Runs one op and returns its outcome. */
export async function probe1(runner: MountedFixture['sandbox'], op: ProbeOp): Promise<string> {
  const [out] = await probe(runner, [op]);
  return out ?? 'missing';
}
