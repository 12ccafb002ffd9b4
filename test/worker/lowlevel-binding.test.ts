// The low-level libfuse 3 binding (@agentfense/fuse-native), exercised through real syscalls on a real mount.
//
// This process is the filesystem server: its JS thread answers the FUSE requests. Every access
// to the mount must therefore be asynchronous (fs.promises, child processes); a synchronous fs
// call on the mount from this thread would deadlock it.
import { execFile } from 'node:child_process';
import {
  mkdtemp,
  readdir,
  readFile,
  rm,
  stat,
  lstat,
  writeFile,
  mkdir,
  rename,
  symlink,
  readlink,
  unlink,
  rmdir,
  chmod,
  truncate,
  utimes,
  open,
} from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { LowLevelFuse } from '@agentfense/fuse-native';
import type * as LL from '@agentfense/fuse-native';

const run = promisify(execFile);
const ENOENT = 2;
const EEXIST = 17;
const ENOTEMPTY = 39;
const ENODATA = 61;
const ERANGE = 34;
const EFBIG = 27;
const S_IFMT = 0o170000;
const nowNs = (): bigint => BigInt(Date.now()) * 1_000_000n;
const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;
const CHUNK = 65536;
// The pid keeps the final no-stale-mount check to this run's mounts: another checkout may be running
// the same file at the same time on a shared machine.
const MOUNT_PREFIX = `agentfense-test-ll-${process.pid}-`;

interface Node {
  ino: number;
  mode: number;
  nlink: number;
  uid: number;
  gid: number;
  size: number;
  atimeNs: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
  chunks: Map<number, Buffer>;
  children: Map<string, number>;
  target: Buffer | null;
  xattrs: Map<string, Buffer>;
}

interface FsConfig {
  entryTimeout?: number;
  attrTimeout?: number;
  /** > 0: unknown names are answered with a negative entry cached this long */
  negativeTimeout?: number;
  /** handlers to leave out (the C side then answers ENOSYS or its default) */
  omit?: (keyof LL.LowLevelHandlers)[];
  /** handlers to add or replace */
  extra?: Partial<LL.LowLevelHandlers>;
}

// Names are keyed by their raw bytes (latin1 maps each byte to one char), so non-UTF-8 names work.
const key = (name: Buffer): string => name.toString('latin1');

class MemFs {
  readonly nodes = new Map<number, Node>();
  readonly counts: Record<string, number> = {};
  readonly writeSizes: number[] = [];
  readonly doubleReplyErrors: string[] = [];
  private nextIno = 2;
  readonly handlers: LL.LowLevelHandlers;

  constructor(private readonly cfg: FsConfig) {
    this.nodes.set(1, this.makeNode(1, S_IFDIR | 0o755));
    this.nodes.get(1)!.nlink = 2;
    this.handlers = MemFs.handlersFor(this);
    for (const name of cfg.omit ?? []) delete this.handlers[name];
    Object.assign(this.handlers, cfg.extra ?? {});
  }

  private makeNode(ino: number, mode: number): Node {
    const now = nowNs();
    return {
      ino,
      mode,
      nlink: 1,
      uid: 0,
      gid: 0,
      size: 0,
      atimeNs: now,
      mtimeNs: now,
      ctimeNs: now,
      chunks: new Map(),
      children: new Map(),
      target: null,
      xattrs: new Map(),
    };
  }

  add(parent: number, name: string, mode: number): Node {
    const n = this.makeNode(this.nextIno++, mode);
    this.nodes.set(n.ino, n);
    this.nodes.get(parent)!.children.set(key(Buffer.from(name)), n.ino);
    return n;
  }

  attr(n: Node): LL.Attr {
    return {
      ino: n.ino,
      mode: n.mode,
      nlink: n.nlink,
      uid: n.uid,
      gid: n.gid,
      size: n.size,
      blocks: Math.ceil(n.size / 512),
      blksize: 4096,
      atimeNs: n.atimeNs,
      mtimeNs: n.mtimeNs,
      ctimeNs: n.ctimeNs,
    };
  }

  entry(n: Node): LL.EntryParam {
    return {
      ino: n.ino,
      attr: this.attr(n),
      entryTimeout: this.cfg.entryTimeout ?? 1,
      attrTimeout: this.cfg.attrTimeout ?? 1,
    };
  }

  readData(n: Node, size: number, off: number): Buffer {
    const end = Math.min(n.size, off + size);
    if (off >= end) return Buffer.alloc(0);
    const out = Buffer.alloc(end - off);
    for (let pos = off; pos < end;) {
      const idx = Math.floor(pos / CHUNK);
      const within = pos - idx * CHUNK;
      const len = Math.min(CHUNK - within, end - pos);
      const chunk = n.chunks.get(idx);
      if (chunk) chunk.copy(out, pos - off, within, within + len);
      pos += len;
    }
    return out;
  }

  writeData(n: Node, data: Buffer, off: number): void {
    for (let done = 0; done < data.length;) {
      const pos = off + done;
      const idx = Math.floor(pos / CHUNK);
      const within = pos - idx * CHUNK;
      const len = Math.min(CHUNK - within, data.length - done);
      let chunk = n.chunks.get(idx);
      if (!chunk) {
        chunk = Buffer.alloc(CHUNK);
        n.chunks.set(idx, chunk);
      }
      data.copy(chunk, within, done, done + len);
      done += len;
    }
    n.size = Math.max(n.size, off + data.length);
    n.mtimeNs = n.ctimeNs = nowNs();
  }

  truncateData(n: Node, size: number): void {
    for (const idx of [...n.chunks.keys()]) {
      if (idx * CHUNK >= size) n.chunks.delete(idx);
      else if ((idx + 1) * CHUNK > size) n.chunks.get(idx)!.fill(0, size - idx * CHUNK);
    }
    n.size = size;
  }

  private count(op: string): void {
    this.counts[op] = (this.counts[op] ?? 0) + 1;
  }

  resetCounts(): void {
    for (const k of Object.keys(this.counts)) delete this.counts[k];
    this.writeSizes.length = 0;
  }

  private static handlersFor(fs: MemFs): LL.LowLevelHandlers {
    const get = (ino: number): Node => fs.nodes.get(ino)!;
    const newChild = (req: LL.Req, parent: number, name: Buffer, mode: number): Node | null => {
      const p = get(parent);
      if (p.children.has(key(name))) {
        req.replyErr(EEXIST);
        return null;
      }
      const n = fs.makeNode(fs.nextIno++, mode);
      n.uid = req.uid;
      n.gid = req.gid;
      fs.nodes.set(n.ino, n);
      p.children.set(key(name), n.ino);
      p.mtimeNs = p.ctimeNs = nowNs();
      return n;
    };
    return {
      lookup(req, parent, name) {
        fs.count('lookup');
        const ino = get(parent).children.get(key(name));
        if (ino !== undefined) return req.replyEntry(fs.entry(get(ino)));
        if (fs.cfg.negativeTimeout)
          return req.replyEntry({ ino: 0, attr: { ino: 0, mode: 0 }, entryTimeout: fs.cfg.negativeTimeout });
        req.replyErr(ENOENT);
      },
      forget() {
        fs.count('forget');
      },
      getattr(req, ino) {
        fs.count('getattr');
        req.replyAttr(fs.attr(get(ino)), fs.cfg.attrTimeout ?? 1);
        // the second answer must throw, not crash or reach the kernel
        try {
          req.replyErr(0);
        } catch (err) {
          fs.doubleReplyErrors.push((err as Error).message);
        }
      },
      setattr(req, ino, changes) {
        fs.count('setattr');
        const n = get(ino);
        const now = nowNs();
        if (changes.mode !== undefined) n.mode = (n.mode & S_IFMT) | (changes.mode & 0o7777);
        if (changes.uid !== undefined) n.uid = changes.uid;
        if (changes.gid !== undefined) n.gid = changes.gid;
        if (changes.size !== undefined) fs.truncateData(n, Number(changes.size));
        if (changes.atime !== undefined) n.atimeNs = changes.atime === 'now' ? now : changes.atime;
        if (changes.mtime !== undefined) n.mtimeNs = changes.mtime === 'now' ? now : changes.mtime;
        n.ctimeNs = now;
        req.replyAttr(fs.attr(n), fs.cfg.attrTimeout ?? 1);
      },
      readlink(req, ino) {
        fs.count('readlink');
        req.replyReadlink(get(ino).target!);
      },
      mknod(req, parent, name, mode) {
        fs.count('mknod');
        const n = newChild(req, parent, name, mode);
        if (n) req.replyEntry(fs.entry(n));
      },
      mkdir(req, parent, name, mode) {
        fs.count('mkdir');
        const n = newChild(req, parent, name, S_IFDIR | (mode & 0o7777));
        if (!n) return;
        n.nlink = 2;
        req.replyEntry(fs.entry(n));
      },
      unlink(req, parent, name) {
        fs.count('unlink');
        const p = get(parent);
        const ino = p.children.get(key(name));
        if (ino === undefined) return req.replyErr(ENOENT);
        p.children.delete(key(name));
        get(ino).nlink--;
        req.replyErr(0);
      },
      rmdir(req, parent, name) {
        fs.count('rmdir');
        const p = get(parent);
        const ino = p.children.get(key(name));
        if (ino === undefined) return req.replyErr(ENOENT);
        if (get(ino).children.size > 0) return req.replyErr(ENOTEMPTY);
        p.children.delete(key(name));
        fs.nodes.delete(ino);
        req.replyErr(0);
      },
      symlink(req, target, parent, name) {
        fs.count('symlink');
        const n = newChild(req, parent, name, S_IFLNK | 0o777);
        if (!n) return;
        n.target = Buffer.from(target);
        n.size = target.length;
        req.replyEntry(fs.entry(n));
      },
      rename(req, parent, name, newparent, newname) {
        fs.count('rename');
        const p = get(parent);
        const ino = p.children.get(key(name));
        if (ino === undefined) return req.replyErr(ENOENT);
        p.children.delete(key(name));
        get(newparent).children.set(key(newname), ino);
        req.replyErr(0);
      },
      link(req, ino, newparent, newname) {
        fs.count('link');
        const n = get(ino);
        get(newparent).children.set(key(newname), ino);
        n.nlink++;
        req.replyEntry(fs.entry(n));
      },
      open(req) {
        fs.count('open');
        req.replyOpen({ fh: 7 });
      },
      read(req, ino, size, offset) {
        fs.count('read');
        // answered later, from another macrotask: replies are asynchronous by design
        setImmediate(() => req.replyBuf(fs.readData(get(ino), size, Number(offset))));
      },
      write(req, ino, data, offset) {
        fs.count('write');
        fs.writeSizes.push(data.length);
        fs.writeData(get(ino), data, Number(offset));
        req.replyWrite(data.length);
      },
      opendir(req) {
        fs.count('opendir');
        req.replyOpen({ fh: 9 });
      },
      readdir(req, ino, _size, offset) {
        fs.count('readdir');
        const n = get(ino);
        const all: LL.Dirent[] = [
          { name: '.', ino, mode: S_IFDIR, nextOffset: 1 },
          { name: '..', ino: 1, mode: S_IFDIR, nextOffset: 2 },
        ];
        for (const [name, child] of n.children)
          all.push({
            name: Buffer.from(name, 'latin1'),
            ino: child,
            mode: get(child).mode,
            nextOffset: all.length + 1,
          });
        req.replyDirents(all.slice(offset));
      },
      statfs(req) {
        fs.count('statfs');
        req.replyStatfs({
          bsize: 4096,
          blocks: 1_000_000,
          bfree: 600_000,
          bavail: 500_000,
          files: 10_000,
          ffree: 9_000,
          namemax: 255,
        });
      },
      setxattr(req, ino, name, value) {
        fs.count('setxattr');
        get(ino).xattrs.set(name, Buffer.from(value));
        req.replyErr(0);
      },
      getxattr(req, ino, name, size) {
        fs.count('getxattr');
        const v = get(ino).xattrs.get(name);
        if (!v) return req.replyErr(ENODATA);
        if (size === 0) return req.replyXattr(v.length);
        if (size < v.length) return req.replyErr(ERANGE);
        req.replyBuf(v);
      },
      listxattr(req, ino, size) {
        fs.count('listxattr');
        const list = Buffer.concat([...get(ino).xattrs.keys()].map((k) => Buffer.from(`${k}\0`)));
        if (size === 0) return req.replyXattr(list.length);
        if (size < list.length) return req.replyErr(ERANGE);
        req.replyBuf(list);
      },
      removexattr(req, ino, name) {
        fs.count('removexattr');
        req.replyErr(get(ino).xattrs.delete(name) ? 0 : ENODATA);
      },
      create(req, parent, name, mode) {
        fs.count('create');
        const n = newChild(req, parent, name, S_IFREG | (mode & 0o7777));
        if (n) req.replyCreate(fs.entry(n), { fh: 11 });
      },
    };
  }
}

interface Mounted {
  fs: MemFs;
  fuse: LL.LowLevelFuse;
  mnt: string;
}

const live: Mounted[] = [];
const ourMountpoints: string[] = [];

async function mountMemFs(cfg: FsConfig = {}, options: LL.LowLevelOptions = {}): Promise<Mounted> {
  const dir = await mkdtemp(join(tmpdir(), MOUNT_PREFIX));
  const mnt = join(dir, 'mnt');
  await mkdir(mnt);
  ourMountpoints.push(mnt);
  const fs = new MemFs(cfg);
  const fuse = new LowLevelFuse(mnt, fs.handlers, {
    fsname: 'agentfense-test',
    subtype: 'memfs',
    ...options,
  });
  await fuse.mount();
  const m = { fs, fuse, mnt };
  live.push(m);
  return m;
}

function mountinfo(): string {
  return readFileSync('/proc/self/mountinfo', 'utf8');
}

function ourThreads(): string[] {
  const names: string[] = [];
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const comm = readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim();
      if (comm.startsWith('fuse-ll-')) names.push(comm);
    } catch {
      // thread exited while listing
    }
  }
  return names;
}

/** stat as a separate process sees it (no fs.promises caching questions, exact coreutils path) */
async function statSize(path: string): Promise<number> {
  const { stdout } = await run('stat', ['-c', '%s', path]);
  return Number(stdout.trim());
}

/** The version string the worker reports a codebase file's attributes with: `ino:size:mtimeNs:ctimeNs`. */
function versionOf(path: string): string {
  const st = statSync(path, { bigint: true });
  return `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

afterEach(async () => {
  while (live.length > 0) {
    const m = live.pop()!;
    await m.fuse.unmount();
    await rm(join(m.mnt, '..'), { recursive: true, force: true });
  }
});

afterAll(() => {
  const info = mountinfo();
  for (const mnt of ourMountpoints) expect(info).not.toContain(` ${mnt} `);
  expect(info).not.toContain(MOUNT_PREFIX);
  expect(ourThreads()).toEqual([]);
});

describe('fuse-native low-level binding', () => {
  it('round-trips file operations through real syscalls', async () => {
    const { fs, mnt } = await mountMemFs();
    expect(mountinfo()).toContain(` ${mnt} `);

    await mkdir(join(mnt, 'dir'));
    await writeFile(join(mnt, 'dir', 'a.txt'), 'hello low level\n');
    expect(await readFile(join(mnt, 'dir', 'a.txt'), 'utf8')).toBe('hello low level\n');
    const { stdout: catOut } = await run('cat', [join(mnt, 'dir', 'a.txt')]);
    expect(catOut).toBe('hello low level\n');
    expect(await readdir(join(mnt, 'dir'))).toEqual(['a.txt']);
    const { stdout: lsOut } = await run('ls', ['-a', mnt]);
    expect(lsOut.split('\n').filter(Boolean)).toEqual(['.', '..', 'dir']);

    const st = await stat(join(mnt, 'dir', 'a.txt'));
    expect(st.isFile()).toBe(true);
    expect(st.size).toBe(16);

    await rename(join(mnt, 'dir', 'a.txt'), join(mnt, 'b.txt'));
    expect((await readdir(mnt)).sort()).toEqual(['b.txt', 'dir']);

    await symlink('b.txt', join(mnt, 'link'));
    expect(await readlink(join(mnt, 'link'))).toBe('b.txt');
    expect((await lstat(join(mnt, 'link'))).isSymbolicLink()).toBe(true);
    expect(await readFile(join(mnt, 'link'), 'utf8')).toBe('hello low level\n');

    await chmod(join(mnt, 'b.txt'), 0o600);
    expect((await stat(join(mnt, 'b.txt'))).mode & 0o7777).toBe(0o600);
    await truncate(join(mnt, 'b.txt'), 5);
    expect(await readFile(join(mnt, 'b.txt'), 'utf8')).toBe('hello');
    await utimes(join(mnt, 'b.txt'), 1_000_000, 2_000_000);
    expect((await stat(join(mnt, 'b.txt'))).mtimeMs).toBe(2_000_000_000);
    await run('touch', [join(mnt, 'b.txt')]); // utimensat(UTIME_NOW) => 'now'
    expect((await stat(join(mnt, 'b.txt'))).mtimeMs).toBeGreaterThan(Date.now() - 60_000);

    // xattrs through the kernel: python's os.*xattr are thin syscall wrappers
    const py = [
      'import os, sys',
      'p = sys.argv[1]',
      "os.setxattr(p, 'user.rule', b'\\x00\\xffbytes')",
      "print(os.getxattr(p, 'user.rule').hex())",
      'print(sorted(os.listxattr(p)))',
      "os.removexattr(p, 'user.rule')",
      'print(os.listxattr(p))',
    ].join('\n');
    const { stdout: xattrOut } = await run('python3', ['-c', py, join(mnt, 'b.txt')]);
    expect(xattrOut.split('\n')).toEqual(['00ff6279746573', "['user.rule']", '[]', '']);

    // a name that is not UTF-8 arrives and leaves as raw bytes
    await run('python3', [
      '-c',
      "import os, sys; open(os.path.join(os.fsencode(sys.argv[1]), b'caf\\xe9'), 'w').write('x'); print(os.listdir(os.fsencode(sys.argv[1])))",
      mnt,
    ]);
    expect([...fs.nodes.get(1)!.children.keys()]).toContain('caf\xe9');

    const { stdout: dfOut } = await run('stat', ['-f', '-c', '%b %a %S', mnt]);
    expect(dfOut.trim()).toBe('1000000 500000 4096');

    await run('ln', [join(mnt, 'b.txt'), join(mnt, 'hard')]);
    expect((await stat(join(mnt, 'hard'))).nlink).toBe(2);
    await unlink(join(mnt, 'hard'));
    await unlink(join(mnt, 'link'));
    await unlink(join(mnt, 'b.txt'));
    await rmdir(join(mnt, 'dir'));
    expect(await readdir(mnt, { encoding: 'buffer' })).toEqual([Buffer.from([0x63, 0x61, 0x66, 0xe9])]);
    expect(fs.doubleReplyErrors.length).toBeGreaterThan(0);
    expect(fs.doubleReplyErrors[0]).toMatch(/already answered/);
    for (const op of [
      'lookup',
      'getattr',
      'setattr',
      'mkdir',
      'create',
      'write',
      'read',
      'readdir',
      'rename',
      'symlink',
      'readlink',
      'unlink',
      'rmdir',
      'link',
      'setxattr',
      'getxattr',
      'listxattr',
      'removexattr',
      'statfs',
    ]) {
      expect(fs.counts[op], op).toBeGreaterThan(0);
    }
  });

  it('handles a sparse file with data beyond 4 GiB (64-bit offsets and sizes)', async () => {
    const { fs, mnt } = await mountMemFs();
    const path = join(mnt, 'sparse');
    const at = 5 * 2 ** 30;
    const payload = Buffer.from('data at five gibibytes');
    const fh = await open(path, 'w+');
    try {
      await fh.write(payload, 0, payload.length, at);
      const back = Buffer.alloc(payload.length);
      const { bytesRead } = await fh.read(back, 0, back.length, at);
      expect(bytesRead).toBe(payload.length);
      expect(back.equals(payload)).toBe(true);
      const hole = Buffer.alloc(16, 1);
      await fh.read(hole, 0, 16, 4 * 2 ** 30 + 100);
      expect(hole.equals(Buffer.alloc(16))).toBe(true);
    } finally {
      await fh.close();
    }
    expect(await statSize(path)).toBe(at + payload.length);
    expect((await stat(path)).size).toBeGreaterThan(4 * 2 ** 30);
    const { stdout } = await run('dd', [
      `if=${path}`,
      'bs=1',
      `skip=${at}`,
      `count=${payload.length}`,
      'status=none',
    ]);
    expect(stdout).toBe(payload.toString());
    expect(fs.nodes.size).toBe(2);
  });

  it('passes offsets above 2^53 exactly (bigint), FALLOCATE, and nanosecond timespecs both ways', async () => {
    const seen: { op: string; args: unknown[] }[] = [];
    // eslint-disable-next-line prefer-const -- assigned once mounted, used by the handler later
    let memfs: MemFs;
    const { fs, mnt } = await mountMemFs({
      extra: {
        write(req, ino, data, offset) {
          if (typeof offset === 'number') {
            memfs.writeData(memfs.nodes.get(ino)!, data, offset);
            req.replyWrite(data.length);
            return;
          }
          seen.push({ op: 'write', args: [offset, data.length] });
          req.replyErr(EFBIG); // this in-memory fs stores nothing that far out
        },
        fallocate(req, _ino, mode, offset, length, fh) {
          seen.push({ op: 'fallocate', args: [mode, offset, length, typeof fh] });
          req.replyErr(0);
        },
      },
    });
    memfs = fs;
    const path = join(mnt, 'f');
    await writeFile(path, 'hello world');
    const py = [
      'import os, sys',
      'fd = os.open(sys.argv[1], os.O_RDWR)',
      'for off in (2**53, 2**53 + 1, 2**62 + 3):',
      '    try:',
      '        os.pwrite(fd, b"XY", off); print("written")',
      '    except OSError as e:',
      '        print(e.errno)',
      'os.posix_fallocate(fd, 2**53 + 1, 2**40 + 7)',
      'os.utime(sys.argv[1], ns=(1_000_000_000_123_456_789, 2_000_000_000_987_654_321))',
      'st = os.stat(sys.argv[1]); print(st.st_atime_ns, st.st_mtime_ns)',
    ].join('\n');
    const { stdout } = await run('python3', ['-c', py, path]);
    expect(stdout.trim().split('\n')).toEqual([
      String(EFBIG),
      String(EFBIG),
      String(EFBIG),
      '1000000000123456789 2000000000987654321',
    ]);
    expect(seen).toEqual([
      { op: 'write', args: [2n ** 53n, 2] },
      { op: 'write', args: [2n ** 53n + 1n, 2] },
      { op: 'write', args: [2n ** 62n + 3n, 2] },
      { op: 'fallocate', args: [0, 2n ** 53n + 1n, 2 ** 40 + 7, 'number'] },
    ]);
    const node = [...fs.nodes.values()].find((n) => n.ino !== 1)!;
    expect(node.atimeNs).toBe(1_000_000_000_123_456_789n);
    expect(node.mtimeNs).toBe(2_000_000_000_987_654_321n);
    expect(await readFile(path, 'utf8')).toBe('hello world');
  });

  it('receives a 1 MiB dd write as one 1 MiB request (libfuse3, max_pages)', async () => {
    const { fs, fuse, mnt } = await mountMemFs();
    expect(fuse.connInfo?.maxWrite).toBe(1 << 20);
    expect(fuse.connInfo?.features.maxPages).toBe(true);
    expect(fuse.connInfo?.libfuseVersion).toMatch(/^3\./);
    fs.resetCounts();
    await run('dd', ['if=/dev/zero', `of=${join(mnt, 'big')}`, 'bs=1M', 'count=1', 'status=none']);
    expect(fs.writeSizes).toEqual([1 << 20]);
    expect(await statSize(join(mnt, 'big'))).toBe(1 << 20);
    // Big payloads cross without a copy (the binding hands its receive buffer over): several in a row,
    // each must arrive intact, none overwritten by the next request.
    const data = randomBytes(3 << 20);
    await writeFile(join(mnt, 'random'), data);
    expect(Buffer.compare(await readFile(join(mnt, 'random')), data)).toBe(0);
  });

  it('maxWrite 128 KiB falls back to 128 KiB requests (the protocol-7.19 size)', async () => {
    const { fs, fuse, mnt } = await mountMemFs({}, { maxWrite: 131072 });
    expect(fuse.connInfo?.maxWrite).toBe(131072);
    expect(fuse.connInfo?.features.maxPages).toBe(false);
    fs.resetCounts();
    await run('dd', ['if=/dev/zero', `of=${join(mnt, 'big')}`, 'bs=1M', 'count=1', 'status=none']);
    expect(fs.writeSizes).toEqual(Array(8).fill(131072));
  });

  it('OPEN answered ENOSYS: a second cat causes no open and no read (page cache kept)', async () => {
    const { fs, mnt } = await mountMemFs({ omit: ['open'], attrTimeout: 3600, entryTimeout: 3600 });
    const f = fs.add(1, 'cached.txt', S_IFREG | 0o644);
    fs.writeData(f, Buffer.from('cached content\n'), 0);
    const first = await run('cat', [join(mnt, 'cached.txt')]);
    expect(first.stdout).toBe('cached content\n');
    expect(fs.counts.read).toBeGreaterThan(0);
    fs.resetCounts();
    const second = await run('cat', [join(mnt, 'cached.txt')]);
    expect(second.stdout).toBe('cached content\n');
    expect(fs.counts.open ?? 0).toBe(0);
    expect(fs.counts.read ?? 0).toBe(0);
  });

  it('OPENDIR answered ENOSYS: a second ls causes no readdir (kernel readdir cache)', async () => {
    const { fs, mnt } = await mountMemFs({ omit: ['opendir'], attrTimeout: 3600, entryTimeout: 3600 });
    for (let i = 0; i < 50; i++) fs.add(1, `f${i}`, S_IFREG | 0o644);
    const first = await run('ls', [mnt]);
    expect(first.stdout.split('\n').filter(Boolean)).toHaveLength(50);
    expect(fs.counts.readdir).toBeGreaterThan(0);
    fs.resetCounts();
    const second = await run('ls', [mnt]);
    expect(second.stdout).toBe(first.stdout);
    expect(fs.counts.readdir ?? 0).toBe(0);
    expect(fs.counts.opendir ?? 0).toBe(0);
  });

  it('notifyInvalInode / notifyInvalEntry / notifyDelete make changes visible despite long timeouts', async () => {
    const { fs, fuse, mnt } = await mountMemFs({
      omit: ['open'],
      attrTimeout: 3600,
      entryTimeout: 3600,
      negativeTimeout: 3600,
    });
    const f = fs.add(1, 'rules.txt', S_IFREG | 0o644);
    fs.writeData(f, Buffer.from('old rules\n'), 0);
    const path = join(mnt, 'rules.txt');
    expect((await run('cat', [path])).stdout).toBe('old rules\n');
    expect(await statSize(path)).toBe(10);

    // change behind the kernel's back: mode and content (same size, so nothing else tells it)
    f.mode = S_IFREG | 0o600;
    f.chunks.clear();
    fs.writeData(f, Buffer.from('new rules\n'), 0);
    expect((await run('stat', ['-c', '%a', path])).stdout.trim()).toBe('644');
    expect((await run('cat', [path])).stdout).toBe('old rules\n');

    expect(await fuse.notifyInvalInode(f.ino, 0, 0)).toBe(0);
    expect((await run('stat', ['-c', '%a', path])).stdout.trim()).toBe('600');
    expect((await run('cat', [path])).stdout).toBe('new rules\n');

    // negative entry cached for an hour; the file appears behind the kernel's back
    await expect(stat(join(mnt, 'later.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    const later = fs.add(1, 'later.txt', S_IFREG | 0o644);
    fs.resetCounts();
    await expect(stat(join(mnt, 'later.txt'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(fs.counts.lookup ?? 0).toBe(0);
    expect(await fuse.notifyInvalEntry(1, 'later.txt')).toBe(0);
    expect((await stat(join(mnt, 'later.txt'))).ino).toBe(later.ino);

    // the file disappears behind the kernel's back: notifyDelete drops the dentry
    fs.nodes.get(1)!.children.delete('later.txt');
    expect((await stat(join(mnt, 'later.txt'))).ino).toBe(later.ino); // still cached
    expect(await fuse.notifyDelete(1, later.ino, Buffer.from('later.txt'))).toBe(0);
    await expect(stat(join(mnt, 'later.txt'))).rejects.toMatchObject({ code: 'ENOENT' });

    // nothing cached for that name: the kernel says ENOENT, which resolves (never rejects)
    expect(await fuse.notifyInvalEntry(1, 'never-looked-up')).toBe(ENOENT);
  });

  it('notifyStore puts bytes into the page cache: a read then sends no READ; an unknown inode is ENOENT', async () => {
    const { fs, fuse, mnt } = await mountMemFs({ omit: ['open'], attrTimeout: 3600, entryTimeout: 3600 });
    const content = Buffer.from('stored ahead\n'.repeat(700)); // 9.1 KiB: two full pages and a partial one
    const f = fs.add(1, 'stored.txt', S_IFREG | 0o644);
    fs.writeData(f, content, 0);
    const path = join(mnt, 'stored.txt');
    expect(await statSize(path)).toBe(content.length); // the kernel now holds the inode
    expect(await fuse.notifyStore(f.ino, 0, new Uint8Array(content))).toBe(0);
    fs.resetCounts();
    expect((await run('cat', [path])).stdout).toBe(content.toString());
    expect(fs.counts.read ?? 0).toBe(0);
    expect(await statSize(path)).toBe(content.length);
    expect(await fuse.notifyStore(987654, 0, Buffer.from('x'))).toBe(ENOENT);
    expect(() => fuse.notifyStore(f.ino, 0, 'text' as unknown as Buffer)).toThrow(TypeError);
  });

  it('storeAhead stores whole host files of the version given; anything else is left for a READ', async () => {
    const { fs, fuse, mnt } = await mountMemFs({ omit: ['open'], attrTimeout: 3600, entryTimeout: 3600 });
    const host = await mkdtemp(join(tmpdir(), 'agentfense-test-ahead-'));
    try {
      const write = async (name: string, text: string): Promise<string> => {
        await writeFile(join(host, name), text);
        return versionOf(join(host, name));
      };
      const kinds = ['same', 'changed', 'big', 'dir', 'warm'] as const;
      const texts = {
        same: 'stored whole\n'.repeat(499) + 'stored wholE\n',
        changed: 'old\n',
        big: 'b'.repeat(70_000),
      };
      const versions = {
        same: await write('same', texts.same),
        changed: await write('changed', texts.changed),
        big: await write('big', texts.big),
      };
      await writeFile(join(host, 'changed'), 'new!\n'); // another version than the one given
      await mkdir(join(host, 'dir'));
      await writeFile(join(host, 'warm'), 'host read-ahead only\n');
      // each node as long as the host file (the kernel's size; the worker stores only a file of that size)
      const served = (k: string): string => 'R'.repeat(k === 'same' ? texts.same.length - 1 : 12) + '\n';
      const nodes = kinds.map((k) => fs.add(1, k, S_IFREG | 0o644));
      kinds.forEach((k, i) => fs.writeData(nodes[i]!, Buffer.from(served(k)), 0));
      kinds.forEach((k, i) => (nodes[i]!.size = served(k).length));
      for (const k of kinds) await statSize(join(mnt, k)); // the kernel holds every node
      const ids = new Float64Array([nodes[0]!.ino, nodes[1]!.ino, nodes[2]!.ino, nodes[3]!.ino, 0]);
      const strings = Buffer.from(
        `same\0${versions.same}\0changed\0${versions.changed}\0big\0${versions.big}\0dir\0${versions.same}\0warm\0\0`,
      );
      const dir = await open(host, 'r');
      let status: Buffer;
      try {
        status = await fuse.storeAhead(dir.fd, 65536, ids, strings);
      } finally {
        await dir.close();
      }
      // stored; a changed file, a file over maxBytes and a directory are not; node 0 only warms the host
      expect([...status]).toEqual([1, 0, 0, 0, 0]);
      fs.resetCounts();
      expect((await run('cat', [join(mnt, 'same')])).stdout).toBe(texts.same);
      expect(fs.counts.read ?? 0).toBe(0);
      for (const k of ['changed', 'big', 'dir', 'warm'])
        expect((await run('cat', [join(mnt, k)])).stdout).toBe(served(k));
      expect(fs.counts.read).toBe(4);
      // a node the kernel does not hold: status 2 (try again once it does)
      const unknown = await open(host, 'r');
      try {
        const again = await fuse.storeAhead(
          unknown.fd,
          65536,
          new Float64Array([987654]),
          Buffer.from(`same\0${versions.same}\0`),
        );
        expect([...again]).toEqual([2]);
      } finally {
        await unknown.close();
      }
      expect(() => fuse.storeAhead(0, 65536, new Float64Array([2]), Buffer.from('a/b\0\0'))).toThrow(
        RangeError,
      );
      expect(() => fuse.storeAhead(0, 65536, new Float64Array([2]), Buffer.from('..\0\0'))).toThrow(
        RangeError,
      );
    } finally {
      await rm(host, { recursive: true, force: true });
    }
  });

  it('bumpStoreEpoch: stores not started are dropped, and a notification waits for the stores in progress', async () => {
    // Eight READs are held unanswered: their pages stay locked, so the eight fetch threads each block in a
    // store into one of those files; a ninth store waits in the queue behind them.
    const held: (() => void)[] = [];
    const hold = new Set<number>();
    const { fs, fuse, mnt } = await mountMemFs({
      omit: ['open'],
      attrTimeout: 3600,
      entryTimeout: 3600,
      extra: {
        read(req, ino, size, offset) {
          fs.counts.read = (fs.counts.read ?? 0) + 1;
          const answer = (): void => req.replyBuf(fs.readData(fs.nodes.get(ino)!, size, Number(offset)));
          if (hold.has(ino)) held.push(answer);
          else setImmediate(answer);
        },
      },
    });
    const host = await mkdtemp(join(tmpdir(), 'agentfense-test-ahead-'));
    const readers: Promise<unknown>[] = [];
    try {
      let strings = '';
      const ids: number[] = [];
      for (let i = 0; i < 9; i++) {
        const n = fs.add(1, `f${i}`, S_IFREG | 0o644);
        fs.writeData(n, Buffer.from(`read ${i}\n`), 0);
        n.size = `read ${i}\n`.length;
        await writeFile(join(host, `f${i}`), `stored ${i}\n`);
        strings += `f${i}\0${versionOf(join(host, `f${i}`))}\0`;
        ids.push(n.ino);
        if (i < 8) hold.add(n.ino);
        await statSize(join(mnt, `f${i}`));
      }
      for (let i = 0; i < 8; i++) readers.push(run('cat', [join(mnt, `f${i}`)]));
      for (let i = 0; i < 200 && held.length < 8; i++) await new Promise((r) => setTimeout(r, 10));
      expect(held).toHaveLength(8);
      const dir = await open(host, 'r');
      const batch = fuse.storeAhead(dir.fd, 65536, new Float64Array(ids), Buffer.from(strings));
      await new Promise((r) => setTimeout(r, 300)); // the fetch threads take f0-f7 and block on the pages
      fuse.bumpStoreEpoch();
      let invalidated = false;
      const inval = fuse.notifyInvalInode(ids[8]!, 0, 0).then(() => (invalidated = true));
      await new Promise((r) => setTimeout(r, 300));
      expect(invalidated).toBe(false); // waits for the stores in progress
      for (const answer of held.splice(0)) answer();
      await inval;
      const status = await batch;
      await dir.close();
      // f0-f7 were in progress when the epoch moved and reached the kernel first; f8 had not started
      expect([...status]).toEqual([1, 1, 1, 1, 1, 1, 1, 1, 0]);
      fs.resetCounts();
      expect((await run('cat', [join(mnt, 'f8')])).stdout).toBe('read 8\n');
      expect(fs.counts.read).toBe(1);
    } finally {
      for (const answer of held.splice(0)) answer();
      await Promise.allSettled(readers);
      await rm(host, { recursive: true, force: true });
    }
  });

  it('hostIo.mallocTrim gives back freed heap pages that freeing alone keeps (holes below live allocations)', async () => {
    // In a child with the worker's malloc settings: 100 KiB buffers come from the heap (below the mmap
    // threshold), each followed by a small one that stays; freeing the big ones leaves ~20 MiB of holes.
    const program = [
      // the built package (a child process runs JavaScript; the global setup builds dist/ first)
      `import { hostIo } from ${JSON.stringify(new URL('../../packages/fuse-native/dist/index.js', import.meta.url).href)};`,
      "import fs from 'node:fs';",
      "const heap = () => Number(/Rss:\\s+(\\d+)/.exec(fs.readFileSync('/proc/self/smaps', 'utf8').split(/\\n(?=[0-9a-f]+-)/).find((b) => b.includes('[heap]')))[1]);",
      'let big = []; const small = [];',
      'for (let i = 0; i < 200; i++) { big.push(Buffer.allocUnsafeSlow(102400).fill(1)); small.push(Buffer.allocUnsafeSlow(4096).fill(1)); }',
      'big = null; gc(); gc();',
      'const before = heap(); const trimmed = hostIo.mallocTrim();',
      'console.log(JSON.stringify({ before, after: heap(), trimmed, kept: small.length }));',
    ].join('\n');
    const { stdout } = await run(process.execPath, ['--expose-gc', '--input-type=module', '-e', program], {
      env: { ...process.env, MALLOC_MMAP_THRESHOLD_: '131072', MALLOC_ARENA_MAX: '1' },
    });
    const r = JSON.parse(stdout) as { before: number; after: number; trimmed: boolean; kept: number };
    expect(r.before).toBeGreaterThan(15_000); // kB resident in the heap before
    expect(r.trimmed).toBe(true);
    expect(r.after).toBeLessThan(r.before - 10_000);
  });

  it('unmount leaves no mount and no thread; options are validated; mount errors are clear', async () => {
    expect(() => new LowLevelFuse('/tmp', {}, { fsname: 'a,allow_other' })).toThrow(/fsname/);
    expect(() => new LowLevelFuse('/tmp', {}, { extraOptions: ['ro,dev'] })).toThrow(/extra option/);
    expect(() => new LowLevelFuse('/tmp', {}, { maxWrite: 12.5 })).toThrow(/maxWrite/);
    expect(() => new LowLevelFuse('/tmp', {}, { bogus: 1 } as unknown as LL.LowLevelOptions)).toThrow(
      /unknown option/,
    );
    await expect(new LowLevelFuse(join(tmpdir(), 'agentfense-no-such-dir'), {}).mount()).rejects.toThrow(
      /not accessible/,
    );

    const m = await mountMemFs();
    // The notifier names itself once it runs, which may be just after mount() resolves: poll briefly.
    // /dev/fuse is read on the JS thread (uv_poll), so the notifier is the binding's only thread.
    for (let i = 0; i < 50 && ourThreads().length < 1; i++) await new Promise((r) => setTimeout(r, 20));
    expect(ourThreads()).toEqual(['fuse-ll-notify']);
    await m.fuse.unmount();
    live.splice(live.indexOf(m), 1);
    expect(mountinfo()).not.toContain(` ${m.mnt} `);
    expect(ourThreads()).toEqual([]);
    expect(await m.fuse.notifyInvalInode(1)).toBe(107); // ENOTCONN once unmounted
    await m.fuse.unmount(); // idempotent
    await rm(join(m.mnt, '..'), { recursive: true, force: true });
  });

  it('prints the per-request round trip (GETATTR with attrTimeout 0)', async () => {
    const { fs, mnt } = await mountMemFs({ attrTimeout: 0, entryTimeout: 3600 });
    fs.add(1, 'f', S_IFREG | 0o644);
    const native = join(mnt, '..', 'native-file');
    await writeFile(native, 'x');
    // A separate process issues the syscalls, as the sandbox will; python's os.stat is one statx.
    const py = [
      'import os, sys, time',
      'p, n = sys.argv[1], int(sys.argv[2])',
      'os.stat(p)',
      't = time.perf_counter()',
      'for _ in range(n): os.stat(p)',
      'print((time.perf_counter() - t) / n * 1e6)',
    ].join('\n');
    const n = 5000;
    const nativeUs = Number((await run('python3', ['-c', py, native, String(n)])).stdout);
    fs.resetCounts();
    const fuseUs = Number((await run('python3', ['-c', py, join(mnt, 'f'), String(n)])).stdout);
    expect(fs.counts.getattr ?? 0).toBeGreaterThanOrEqual(n);
    console.log(
      `[lowlevel round trip] stat on a warm dentry, attrTimeout 0: ${fuseUs.toFixed(1)} µs/op through FUSE (${fs.counts.getattr} GETATTR), ${nativeUs.toFixed(2)} µs/op native tmpfs/disk`,
    );
  });
});
