// PolicyFs in process, no mount: the permission -> errno decisions of contract §2 (docs/contract.md), the
// delta they write into and the audit they leave, called op by op over a temporary codebase and delta.
// test/worker/spec-table.test.ts checks the same table through a real mount and the kernel; this file
// pins the worker's own half of it (what a host-root caller, who skips the mode bits, would get).
import { constants } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';

import { compileRules, type AuditEvent, type PermissionRule } from '@agentfense/protocol';

import { AuditLog } from '../../src/audit.js';
import { Delta } from '../../src/delta/delta.js';
import { ROOT_INO } from '../../src/fs/inodes.js';
import { PolicyFs, type Caller, type Invalidator } from '../../src/fs/policy-fs.js';

// pid 0: no /proc/<pid>/syscall is consulted (kernel-denials.ts answers null for it).
const CALLER: Caller = { pid: 0, uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };

const CODEBASE: Record<string, string> = {
  'README.md': 'top-level readme\n',
  'other.txt': 'matched by no rule\n',
  'src/app.py': 'print("app")\n',
  'docs/guide.md': 'the guide\n',
  'secrets/key.pem': 'PRIVATE\n',
  'secrets/public.key': 'PUBLIC\n',
  'work/notes.txt': 'original notes\n',
  'work/cfg/id.pem': 'hidden inside a write area\n',
  'work/cfg/settings.ini': 'a=1\n',
  'scratch/': '',
};

const RULES: PermissionRule[] = [
  { pattern: '/README.md', permission: 'read' },
  { pattern: '/src/', permission: 'read' },
  { pattern: '/docs/', permission: 'view' },
  { pattern: '/work/', permission: 'write' },
  { pattern: '/scratch/', permission: 'write' },
  { pattern: '**/secrets/**', permission: 'none' },
  { pattern: '/secrets/public.key', permission: 'read' },
  { pattern: '*.pem', permission: 'none', priority: 10 },
];

interface Setup {
  readonly fs: PolicyFs;
  readonly lower: string;
  readonly deltaDir: string;
  /** Denials (and allows, when enabled) recorded so far. */
  audit(): AuditEvent[];
  /** The node id of a codebase path, looked up component by component as the kernel would. */
  ino(path: string): Promise<number>;
}

async function setup(rules: PermissionRule[] = RULES): Promise<Setup> {
  const root = await mkdtemp(join(tmpdir(), 'af-policy-fs-'));
  onTestFinished(() => rm(root, { recursive: true, force: true }));
  const lower = join(root, 'lower');
  const deltaDir = join(root, 'delta');
  await mkdir(lower);
  await mkdir(deltaDir);
  for (const [path, content] of Object.entries(CODEBASE)) {
    if (path.endsWith('/')) {
      await mkdir(join(lower, path), { recursive: true });
      continue;
    }
    await mkdir(dirname(join(lower, path)), { recursive: true });
    await writeFile(join(lower, path), content);
  }
  const delta = await Delta.open({ lowerDir: lower, deltaDir });
  const events: AuditEvent[] = [];
  const audit = new AuditLog({ emit: (batch) => events.push(...batch) });
  const fs = new PolicyFs({
    delta,
    rules: compileRules(rules),
    audit,
    cacheTtlSeconds: 60,
    uid: CALLER.uid,
    gid: CALLER.gid,
    statfsPath: deltaDir,
  });
  onTestFinished(async () => {
    audit.flush();
    await fs.close();
    await delta.close();
  });
  return {
    fs,
    lower,
    deltaDir,
    audit: () => {
      audit.flush();
      return events;
    },
    ino: async (path) => {
      let ino = ROOT_INO;
      for (const name of path.split('/').filter((part) => part !== '')) {
        const entry = await fs.lookup(ino, name, CALLER);
        if (entry.ino === 0) throw new Error(`${path}: ${name} does not exist`);
        ino = entry.ino;
      }
      return ino;
    },
  };
}

/** The names a directory lists, without '.' and '..'. */
async function names(s: Setup, dir: string): Promise<string[]> {
  const listing = await s.fs.readdir(await s.ino(dir), 0, CALLER);
  return listing
    .map((entry) => entry.name)
    .filter((name) => name !== '.' && name !== '..')
    .sort();
}

const errno = (name: string): { errnoName: string } => ({ errnoName: name });

describe('none: the path does not exist for the sandbox', () => {
  it('is absent from readdir, and a lookup answers it exactly as a name that does not exist', async () => {
    const s = await setup();
    expect(await names(s, '/')).toEqual(['README.md', 'docs', 'scratch', 'secrets', 'src', 'work']);
    // Both a negative entry with the same timeout: neither caching nor timing tells them apart.
    const hidden = await s.fs.lookup(ROOT_INO, 'other.txt', CALLER);
    const missing = await s.fs.lookup(await s.ino('/work'), 'missing.txt', CALLER);
    expect(hidden).toEqual(missing);
    expect(missing).toMatchObject({ ino: 0 });
    expect(missing).not.toEqual({ ino: 0, entryTimeout: 0 });
  });

  it('a directory hidden by a glob but holding an exception lists only the exception', async () => {
    const s = await setup();
    expect(await names(s, '/secrets')).toEqual(['public.key']);
    const secrets = await s.ino('/secrets');
    expect(await s.fs.lookup(secrets, 'key.pem', CALLER)).toMatchObject({ ino: 0 });
    const pub = await s.ino('/secrets/public.key');
    expect((await s.fs.read(pub, 100, 0, CALLER)).toString()).toBe('PUBLIC\n');
  });

  it('unlink and rename away are ENOENT; creating a file there is EACCES; the codebase keeps the file', async () => {
    const s = await setup();
    await expect(s.fs.unlink(ROOT_INO, 'other.txt', CALLER)).rejects.toMatchObject(errno('ENOENT'));
    const work = await s.ino('/work');
    await expect(s.fs.rename(ROOT_INO, 'other.txt', work, 'stolen.txt', CALLER)).rejects.toMatchObject(
      errno('ENOENT'),
    );
    await expect(s.fs.create(ROOT_INO, 'new.txt', 0o644, constants.O_WRONLY, CALLER)).rejects.toMatchObject(
      errno('EACCES'),
    );
    await expect(readFile(join(s.lower, 'other.txt'), 'utf8')).resolves.toBe('matched by no rule\n');
  });

  it('the control plane reads it as the sandbox would: ENOENT', async () => {
    const s = await setup();
    await expect(s.fs.readPath('/secrets/key.pem', CALLER)).rejects.toMatchObject(errno('ENOENT'));
  });
});

describe('view: listed, content unreadable', () => {
  it('lookup and getattr succeed with no read or write bits; read, readFile and access(R_OK) are EACCES', async () => {
    const s = await setup();
    expect(await names(s, '/docs')).toEqual(['guide.md']);
    const guide = await s.ino('/docs/guide.md');
    const attr = await s.fs.getattr(guide, CALLER);
    expect(attr.mode & 0o666).toBe(0);
    expect(attr.size).toBe('the guide\n'.length);
    await expect(s.fs.read(guide, 100, 0, CALLER)).rejects.toMatchObject(errno('EACCES'));
    await expect(s.fs.readPath('/docs/guide.md', CALLER)).rejects.toMatchObject(errno('EACCES'));
    await expect(s.fs.access(guide, constants.R_OK, CALLER)).rejects.toMatchObject(errno('EACCES'));
  });

  it('every denial is audited with the op, the path, the permission and the errno', async () => {
    const s = await setup();
    const guide = await s.ino('/docs/guide.md');
    await expect(s.fs.read(guide, 100, 0, CALLER)).rejects.toThrow();
    expect(s.audit()).toContainEqual(
      expect.objectContaining({
        op: 'read',
        path: '/docs/guide.md',
        decision: 'deny',
        permission: 'view',
        errno: 'EACCES',
      }),
    );
  });
});

describe('read: content readable, nothing writable', () => {
  it('reads the codebase content; the reported mode has no write bits', async () => {
    const s = await setup();
    const app = await s.ino('/src/app.py');
    expect((await s.fs.read(app, 100, 0, CALLER)).toString()).toBe('print("app")\n');
    expect((await s.fs.getattr(app, CALLER)).mode & 0o222).toBe(0);
  });

  it('write, truncate, chmod, chown, setxattr and access(W_OK) are EACCES, and nothing reaches the delta', async () => {
    const s = await setup();
    const app = await s.ino('/src/app.py');
    await expect(s.fs.write(app, Buffer.from('evil'), 0, CALLER)).rejects.toMatchObject(errno('EACCES'));
    await expect(s.fs.setattr(app, { size: 0 }, CALLER)).rejects.toMatchObject(errno('EACCES'));
    await expect(s.fs.setattr(app, { mode: 0o777 }, CALLER)).rejects.toMatchObject(errno('EACCES'));
    await expect(s.fs.setattr(app, { uid: CALLER.uid }, CALLER)).rejects.toMatchObject(errno('EACCES'));
    expect(() => s.fs.xattrSet(app, 'user.x', CALLER)).toThrow(expect.objectContaining(errno('EACCES')));
    await expect(s.fs.access(app, constants.W_OK, CALLER)).rejects.toMatchObject(errno('EACCES'));
    await expect(s.fs.writePath('/src/app.py', Buffer.from('evil'), CALLER)).rejects.toMatchObject(
      errno('EACCES'),
    );
    expect((await s.fs.read(app, 100, 0, CALLER)).toString()).toBe('print("app")\n');
    await expect(stat(join(s.deltaDir, 'upper', 'src', 'app.py'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('create, mkdir, symlink, unlink and rename away are EACCES; the file stays', async () => {
    const s = await setup();
    const src = await s.ino('/src');
    await expect(s.fs.create(src, 'new.py', 0o644, constants.O_WRONLY, CALLER)).rejects.toMatchObject(
      errno('EACCES'),
    );
    await expect(s.fs.mkdir(src, 'pkg', 0o755, CALLER)).rejects.toMatchObject(errno('EACCES'));
    await expect(s.fs.symlink('/etc/passwd', src, 'link', CALLER)).rejects.toMatchObject(errno('EACCES'));
    await expect(s.fs.unlink(src, 'app.py', CALLER)).rejects.toMatchObject(errno('EACCES'));
    await expect(s.fs.rename(src, 'app.py', src, 'moved.py', CALLER)).rejects.toMatchObject(errno('EACCES'));
    expect(await names(s, '/src')).toEqual(['app.py']);
  });
});

describe('write: allowed, and every change lands in the delta only', () => {
  it('a new file is created, written and read back; it exists in the delta, not in the codebase', async () => {
    const s = await setup();
    const work = await s.ino('/work');
    const made = await s.fs.create(work, 'new.txt', 0o644, constants.O_WRONLY, CALLER);
    expect(await s.fs.write(made.ino, Buffer.from('hello'), 0, CALLER)).toBe(5);
    expect((await s.fs.read(made.ino, 100, 0, CALLER)).toString()).toBe('hello');
    expect(await names(s, '/work')).toContain('new.txt');
    await expect(readFile(join(s.deltaDir, 'upper', 'work', 'new.txt'), 'utf8')).resolves.toBe('hello');
    await expect(stat(join(s.lower, 'work', 'new.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('writing a codebase file copies it up: the sandbox sees the change, the codebase does not', async () => {
    const s = await setup();
    const notes = await s.ino('/work/notes.txt');
    await s.fs.write(notes, Buffer.from('REPLACED'), 0, CALLER);
    expect((await s.fs.read(notes, 100, 0, CALLER)).toString()).toBe('REPLACED notes\n');
    await expect(readFile(join(s.lower, 'work', 'notes.txt'), 'utf8')).resolves.toBe('original notes\n');
    await expect(s.fs.readPath('/work/notes.txt', CALLER)).resolves.toEqual(Buffer.from('REPLACED notes\n'));
  });

  it('setxattr is allowed by the rules but not stored: ENOTSUP', async () => {
    const s = await setup();
    const notes = await s.ino('/work/notes.txt');
    expect(() => s.fs.xattrSet(notes, 'user.x', CALLER)).toThrow(expect.objectContaining(errno('ENOTSUP')));
  });

  it('a hidden name inside a write area cannot be created, even by the control plane', async () => {
    const s = await setup();
    const work = await s.ino('/work');
    await expect(s.fs.create(work, 'new.pem', 0o600, constants.O_WRONLY, CALLER)).rejects.toMatchObject(
      errno('EACCES'),
    );
    await expect(s.fs.writePath('/work/new.pem', Buffer.from('x'), CALLER)).rejects.toMatchObject(
      errno('ENOENT'),
    );
  });

  it('a device node needs root: EPERM for an ordinary uid, and nothing is created', async () => {
    const s = await setup();
    const work = await s.ino('/work');
    const user: Caller = { pid: 0, uid: 1000, gid: 1000 };
    await expect(s.fs.mknod(work, 'tty', constants.S_IFCHR | 0o600, 0x0501, user)).rejects.toMatchObject(
      errno('EPERM'),
    );
    expect(await names(s, '/work')).not.toContain('tty');
  });
});

describe('whiteouts', () => {
  it('an unlinked codebase file is gone from lookup and readdir, and still in the codebase', async () => {
    const s = await setup();
    const work = await s.ino('/work');
    await s.fs.unlink(work, 'notes.txt', CALLER);
    expect(await s.fs.lookup(work, 'notes.txt', CALLER)).toMatchObject({ ino: 0 });
    expect(await names(s, '/work')).toEqual(['cfg']);
    await expect(readFile(join(s.lower, 'work', 'notes.txt'), 'utf8')).resolves.toBe('original notes\n');
  });

  it('a file named like an overlayfs whiteout is an ordinary file and hides nothing', async () => {
    const s = await setup();
    const work = await s.ino('/work');
    await s.fs.create(work, '.wh.notes.txt', 0o644, constants.O_WRONLY, CALLER);
    expect(await names(s, '/work')).toEqual(['.wh.notes.txt', 'cfg', 'notes.txt']);
    const notes = await s.ino('/work/notes.txt');
    expect((await s.fs.read(notes, 100, 0, CALLER)).toString()).toBe('original notes\n');
  });

  it('a directory holding a hidden entry cannot be removed (ENOTEMPTY): hidden content is never deleted', async () => {
    const s = await setup();
    const work = await s.ino('/work');
    const cfg = await s.ino('/work/cfg');
    expect(await names(s, '/work/cfg')).toEqual(['settings.ini']);
    await s.fs.unlink(cfg, 'settings.ini', CALLER);
    await expect(s.fs.rmdir(work, 'cfg', CALLER)).rejects.toMatchObject(errno('ENOTEMPTY'));
    await expect(readFile(join(s.lower, 'work', 'cfg', 'id.pem'), 'utf8')).resolves.toBe(
      'hidden inside a write area\n',
    );
  });
});

describe('rename and link across permissions', () => {
  it('renaming a written file into a read-only directory is EACCES and leaves it where it was', async () => {
    const s = await setup();
    const work = await s.ino('/work');
    const src = await s.ino('/src');
    await expect(s.fs.rename(work, 'notes.txt', src, 'notes.txt', CALLER)).rejects.toMatchObject(
      errno('EACCES'),
    );
    expect(await names(s, '/work')).toContain('notes.txt');
    expect(await names(s, '/src')).toEqual(['app.py']);
    expect(s.audit()).toContainEqual(
      expect.objectContaining({
        op: 'rename',
        path: '/src/notes.txt',
        errno: 'EACCES',
        target: '/work/notes.txt',
      }),
    );
  });

  it('renaming onto a hidden name is EACCES (the sandbox could not have created it)', async () => {
    const s = await setup();
    const work = await s.ino('/work');
    await expect(s.fs.rename(work, 'notes.txt', work, 'notes.pem', CALLER)).rejects.toMatchObject(
      errno('EACCES'),
    );
  });

  it('within one write area a rename succeeds: old name gone, new name has the content', async () => {
    const s = await setup();
    const work = await s.ino('/work');
    await s.fs.rename(work, 'notes.txt', work, 'renamed.txt', CALLER);
    expect(await names(s, '/work')).toEqual(['cfg', 'renamed.txt']);
    const renamed = await s.ino('/work/renamed.txt');
    expect((await s.fs.read(renamed, 100, 0, CALLER)).toString()).toBe('original notes\n');
    await expect(readFile(join(s.lower, 'work', 'notes.txt'), 'utf8')).resolves.toBe('original notes\n');
  });

  it('a directory that came from the codebase does not move (EXDEV: tools copy instead)', async () => {
    const s = await setup();
    const work = await s.ino('/work');
    await expect(s.fs.rename(work, 'cfg', work, 'cfg2', CALLER)).rejects.toMatchObject(errno('EXDEV'));
  });

  it('a hard link between two write areas decided by different rules is EXDEV; within one it works', async () => {
    const s = await setup();
    const notes = await s.ino('/work/notes.txt');
    const scratch = await s.ino('/scratch');
    const work = await s.ino('/work');
    await expect(s.fs.link(notes, scratch, 'notes.txt', CALLER)).rejects.toMatchObject(errno('EXDEV'));
    const linked = await s.fs.link(notes, work, 'again.txt', CALLER);
    expect(linked.attr.nlink).toBe(2);
    await expect(stat(join(s.lower, 'work', 'again.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a hard link from a read-only file is EACCES', async () => {
    const s = await setup();
    const app = await s.ino('/src/app.py');
    const work = await s.ino('/work');
    await expect(s.fs.link(app, work, 'app.py', CALLER)).rejects.toMatchObject(errno('EACCES'));
  });
});

describe('rule changes and the kernel caches', () => {
  it('hiding a file the kernel holds makes getattr and read ENOENT at once', async () => {
    const s = await setup();
    const notes = await s.ino('/work/notes.txt');
    await s.fs.read(notes, 100, 0, CALLER);
    await s.fs.setRules(compileRules([...RULES, { pattern: '/work/notes.txt', permission: 'none' }]));
    await expect(s.fs.getattr(notes, CALLER)).rejects.toMatchObject(errno('ENOENT'));
    await expect(s.fs.read(notes, 100, 0, CALLER)).rejects.toMatchObject(errno('ENOENT'));
    expect(await names(s, '/work')).toEqual(['cfg']);
  });

  it('a name answered as missing is dropped from the kernel when the control plane creates it', async () => {
    const s = await setup();
    const dropped: string[] = [];
    const invalidator: Invalidator = {
      inode: () => Promise.resolve(),
      entry: (parent, name) => {
        dropped.push(`${parent}/${name}`);
        return Promise.resolve();
      },
    };
    s.fs.invalidator = invalidator;
    const work = await s.ino('/work');
    const negative = await s.fs.lookup(work, 'later.txt', CALLER);
    expect(negative).toMatchObject({ ino: 0, entryTimeout: 60 });
    await s.fs.writePath('/work/later.txt', Buffer.from('now it exists'), CALLER);
    expect(dropped).toContain(`${work}/later.txt`);
    expect((await s.fs.lookup(work, 'later.txt', CALLER)).ino).toBeGreaterThan(0);
  });

  it('a codebase file changed behind the sandbox is taken back from the kernel at its next getattr, once', async () => {
    const s = await setup();
    const dropped: number[] = [];
    s.fs.invalidator = {
      inode: (ino) => {
        dropped.push(ino);
        return Promise.resolve();
      },
      entry: () => Promise.resolve(),
    };
    const readme = await s.ino('/README.md');
    await s.fs.getattr(readme, CALLER);
    expect(dropped).toEqual([]); // the same version as the lookup reported
    await writeFile(join(s.lower, 'README.md'), 'changed on the host\n');
    expect((await s.fs.getattr(readme, CALLER)).size).toBe('changed on the host\n'.length);
    expect(dropped).toEqual([readme]);
    await s.fs.getattr(readme, CALLER);
    expect(dropped).toEqual([readme]);
    // same size, new times (an editor's save of the same length), past the timestamps' coarse granularity
    await new Promise((resolve) => setTimeout(resolve, 50));
    await writeFile(join(s.lower, 'README.md'), 'CHANGED ON THE HOST\n');
    await s.fs.getattr(readme, CALLER);
    expect(dropped).toEqual([readme, readme]);
  });
});
