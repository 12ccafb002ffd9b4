// contract §2, row by row, with the errno each row names, on a real mount: once inside bwrap as the
// product's capability-less sandbox user (mode bits + default_permissions answer on the warm path), and
// once as host root (CAP_DAC_OVERRIDE skips the mode bits, so the worker's own checks must answer).
import { describe, expect, it } from 'vitest';
import type { PermissionRule } from '@agentfense/protocol';
import { mountFixture, useMountHygiene } from '../helpers/worker-fixture.js';
import type { MountedFixture } from '../helpers/worker-fixture.js';
import { probe } from '../helpers/worker-probe.js';
import type { ProbeOp } from '../helpers/worker-probe.js';

const RULES: readonly PermissionRule[] = [
  { pattern: '**', permission: 'read' },
  { pattern: '/w/**', permission: 'write', priority: 10 },
  { pattern: '/v/**', permission: 'view', priority: 10 },
  { pattern: '/h/**', permission: 'none', priority: 10 },
  { pattern: '*.key', permission: 'none', priority: 100 },
  { pattern: '/w/ro.txt', permission: 'read', priority: 20 },
  { pattern: '/w/vo.txt', permission: 'view', priority: 20 },
];

const TREE = {
  'h/secret.txt': 'secret',
  'h/sub/deep.txt': 'deep',
  'v/view.txt': 'view',
  'v/vdir/x.txt': 'x',
  'v/vlink': { symlink: 'view.txt' },
  'r/read.txt': 'read',
  'r/rdir/x.txt': 'x',
  'r/rlink': { symlink: 'read.txt' },
  'r/rm.txt': 'rm',
  'w/file.txt': 'write',
  'w/wdir/x.txt': 'x',
  'w/emptydir': { dir: true },
  'w/wlink': { symlink: 'file.txt' },
  'w/hidden.key': 'k',
  'w/ro.txt': 'ro',
  'w/vo.txt': 'vo',
  'w/hlink': { symlink: '../h/secret.txt' },
} as const;

type Who = 'sandbox' | 'host';

describe.each<Who>(['sandbox', 'host'])('contract §2 table as %s', (who) => {
  let f: MountedFixture;
  const run = (ops: readonly ProbeOp[]): Promise<string[]> => probe(f[who], ops);
  // One fixture per describe: the hygiene hooks stop it after the first test, so mount per test.
  useMountHygiene();
  const fresh = async (): Promise<void> => {
    f = await mountFixture({ tree: TREE, rules: RULES });
  };

  it('stat / lstat: none ENOENT, view/read/write ok; readdir lists only visible entries', async () => {
    await fresh();
    expect(
      await run([
        ['stat', 'h'],
        ['stat', 'h/secret.txt'],
        ['lstat', 'w/hidden.key'],
        ['stat', 'v/view.txt'],
        ['stat', 'r/read.txt'],
        ['stat', 'w/file.txt'],
        ['lstat', 'v/vlink'],
        ['listdir', '.'],
        ['listdir', 'w'],
        ['listdir', 'v'],
      ]),
    ).toEqual([
      'ENOENT',
      'ENOENT',
      'ENOENT',
      'ok:0o100000',
      'ok:0o100444',
      'ok:0o100644',
      'ok:0o120777',
      'ok:r,v,w',
      'ok:emptydir,file.txt,hlink,ro.txt,vo.txt,wdir,wlink',
      'ok:vdir,view.txt,vlink',
    ]);
  });

  it('modes: view shows no rwx, read no w, write as on disk', async () => {
    await fresh();
    const out = await run([
      ['stat', 'v/view.txt'],
      ['stat', 'r/read.txt'],
      ['stat', 'w/file.txt'],
      ['stat', 'v'],
      ['stat', 'r'],
      ['stat', 'w'],
    ]);
    expect(out).toEqual([
      'ok:0o100000',
      'ok:0o100444',
      'ok:0o100644',
      'ok:0o40555',
      'ok:0o40555',
      'ok:0o40755',
    ]);
  });

  it('access(2) answers by the rules (as root the kernel answers from capabilities)', async () => {
    await fresh();
    // With default_permissions the kernel answers access(2) from the mode bits (which encode the rules)
    // and never sends ACCESS; host root's CAP_DAC_OVERRIDE then says yes to R/W, which only it has.
    const root = who === 'host';
    expect(
      await run([
        ['access', 'v/view.txt', 'F'],
        ['access', 'v/view.txt', 'R'],
        ['access', 'r/read.txt', 'R'],
        ['access', 'r/read.txt', 'W'],
        ['access', 'w/file.txt', 'W'],
        ['access', 'h/secret.txt', 'F'],
      ]),
    ).toEqual(['ok:yes', root ? 'ok:yes' : 'ok:no', 'ok:yes', root ? 'ok:yes' : 'ok:no', 'ok:yes', 'ok:no']);
  });

  it('open for reading and readlink: none ENOENT, view EACCES, read/write ok', async () => {
    await fresh();
    expect(
      await run([
        ['read', 'h/secret.txt'],
        ['read', 'w/hidden.key'],
        ['read', 'v/view.txt'],
        ['read', 'w/vo.txt'],
        ['read', 'r/read.txt'],
        ['read', 'w/file.txt'],
        ['readlink', 'v/vlink'],
        ['readlink', 'r/rlink'],
        ['readlink', 'w/wlink'],
        ['read', 'r/rlink'],
      ]),
    ).toEqual([
      'ENOENT',
      'ENOENT',
      'EACCES',
      'EACCES',
      'ok:read',
      'ok:write',
      'EACCES',
      'ok:read.txt',
      'ok:file.txt',
      'ok:read',
    ]);
  });

  it('open for writing, truncate, chmod, utimens, setxattr: none ENOENT, view/read EACCES, write ok', async () => {
    await fresh();
    // Opening for writing without writing: as root no OPEN reaches the worker (the kernel answers it,
    // README "What reaches the worker"), so the first write is where the worker refuses.
    const denied = (path: string): ProbeOp[] => [
      who === 'sandbox' ? ['openw', path] : ['rewrite', path, 'x'],
      ['opentrunc', path],
      ['truncate', path],
      ['chmod', path],
      ['utime', path],
      ['setxattr', path],
    ];
    const out = await run([
      ...denied('w/hidden.key'),
      ...denied('v/view.txt'),
      ...denied('r/read.txt'),
      ...denied('w/ro.txt'),
      ['openw', 'w/file.txt'],
      ['truncate', 'w/file.txt'],
      ['chmod', 'w/file.txt'],
      ['utime', 'w/file.txt'],
      ['stat', 'w/file.txt'],
      ['setxattr', 'w/file.txt'],
      ['chmod', 'w/wdir'],
      ['utime', 'w/wdir'],
    ]);
    expect(out).toEqual([
      ...Array<string>(6).fill('ENOENT'),
      ...Array<string>(18).fill('EACCES'),
      'ok',
      'ok',
      'ok',
      'ok',
      'ok:0o100640',
      'ENOTSUP', // documented choice: no xattrs are stored in write areas
      'ok',
      'ok',
    ]);
  });

  it('create (file, dir, symlink, fifo) at a path: EACCES below write, ok in write areas', async () => {
    await fresh();
    const creates = (dir: string, suffix = ''): ProbeOp[] => [
      ['create', `${dir}/new${suffix}`],
      ['mkdir', `${dir}/newdir${suffix}`],
      ['symlink', `${dir}/newlink${suffix}`, 'x'],
      ['mkfifo', `${dir}/fifo${suffix}`],
    ];
    const out = await run([
      ...creates('w', '.key'),
      ...creates('v'),
      ...creates('r'),
      ...creates('w'),
      ['listdir', 'w'],
    ]);
    expect(out).toEqual([
      ...Array<string>(12).fill('EACCES'),
      'ok',
      'ok',
      'ok',
      'ok',
      'ok:emptydir,fifo,file.txt,hlink,new,newdir,newlink,ro.txt,vo.txt,wdir,wlink',
    ]);
  });

  it('unlink / rmdir / rename away: none ENOENT, view/read EACCES, write ok', async () => {
    await fresh();
    const out = await run([
      ['unlink', 'w/hidden.key'],
      ['unlink', 'h/secret.txt'],
      ['unlink', 'v/view.txt'],
      ['unlink', 'r/rm.txt'],
      ['unlink', 'w/ro.txt'],
      ['unlink', 'w/vo.txt'],
      ['rmdir', 'v/vdir'],
      ['rmdir', 'r/rdir'],
      ['rename', 'w/hidden.key', 'w/k2'],
      ['rename', 'v/view.txt', 'w/v2'],
      ['rename', 'r/read.txt', 'w/r2'],
      ['rename', 'w/ro.txt', 'w/ro2'],
      ['rename', 'w/file.txt', 'r/w2'],
      ['rename', 'w/file.txt', 'w/x.key'],
      ['unlink', 'w/wlink'],
      ['rmdir', 'w/emptydir'],
      ['rename', 'w/file.txt', 'w/renamed.txt'],
      ['listdir', 'w'],
      ['read', 'r/read.txt'],
      ['read', 'w/ro.txt'],
    ]);
    expect(out).toEqual([
      'ENOENT',
      'ENOENT',
      'EACCES',
      'EACCES',
      'EACCES',
      'EACCES',
      'EACCES',
      'EACCES',
      'ENOENT',
      'EACCES',
      'EACCES',
      'EACCES',
      'EACCES',
      'EACCES',
      'ok',
      'ok',
      'ok',
      'ok:hlink,renamed.txt,ro.txt,vo.txt,wdir',
      'ok:read',
      'ok:ro',
    ]);
  });

  it('link needs write on both sides; a hidden or read-only file cannot be linked into a write area', async () => {
    await fresh();
    const out = await run([
      ['link', 'r/read.txt', 'w/l1'],
      ['link', 'w/ro.txt', 'w/l2'],
      ['link', 'w/hidden.key', 'w/l3'],
      ['link', 'h/secret.txt', 'w/l4'],
      ['link', 'v/view.txt', 'w/l5'],
      ['link', 'w/file.txt', 'r/l6'],
      ['link', 'w/file.txt', 'w/l7'],
      ['write', 'w/l7', 'changed'],
      ['read', 'w/file.txt'],
      ['stat', 'w/l1'],
    ]);
    expect(out).toEqual([
      'EACCES',
      'EACCES',
      'ENOENT',
      'ENOENT',
      'EACCES',
      'EACCES',
      'ok',
      'ok',
      'ok:changed',
      'ENOENT',
    ]);
    // The codebase file was never hard-linked: it keeps one link and its content.
    const { stat, readFile } = await import('node:fs/promises');
    expect((await stat(`${f.lower}/w/file.txt`)).nlink).toBe(1);
    expect(await readFile(`${f.lower}/w/file.txt`, 'utf8')).toBe('write');
  });

  it('chown needs write (to oneself: ok); statfs works; getxattr/listxattr are EOPNOTSUPP', async () => {
    await fresh();
    const out = await run([
      ['chown', 'w/file.txt'],
      ['chown', 'r/read.txt'],
      ['chown', 'h/secret.txt'],
      ['statvfs', '.'],
      ['statvfs', 'w'],
      ['getxattr', 'r/read.txt'],
      ['listxattr', 'r/read.txt'],
    ]);
    // ENOTSUP == EOPNOTSUPP on Linux (python names errno 95 ENOTSUP).
    expect(out).toEqual(['ok', 'EACCES', 'ENOENT', 'ok:blocks>0', 'ok:blocks>0', 'ENOTSUP', 'ENOTSUP']);
    const df = await f[who]('df -P . | tail -1');
    expect(df.code).toBe(0);
    expect(df.stdout).toMatch(/agentfense/);
  });

  it('a symlink to a hidden path resolves through the mount: ENOENT', async () => {
    await fresh();
    const out = await run([
      ['read', 'w/hlink'],
      ['symlink', 'w/mine', '../h/sub/deep.txt'],
      ['read', 'w/mine'],
      ['readlink', 'w/mine'],
    ]);
    expect(out).toEqual(['ENOENT', 'ok', 'ENOENT', 'ok:../h/sub/deep.txt']);
  });
});
