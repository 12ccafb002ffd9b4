// The adapter between the low-level binding (@agentfense/fuse-native) and PolicyFs: decodes names, answers
// each request exactly once (value or errno), and counts every op with its latency.
//
// GETXATTR and LISTXATTR have no handler either: no attributes are stored, and ENOSYS makes the kernel
// answer EOPNOTSUPP itself from then on (`ls -l` asks once per file for ACLs and SELinux labels).
// SETXATTR/REMOVEXATTR stay, so a write-permission denial still reads EACCES (contract §2).
//
// OPEN, OPENDIR, FLUSH, RELEASE(DIR) and FSYNCDIR have no handler on purpose: the binding then answers
// ENOSYS (or success) on its own thread, and the kernel stops sending them (no_open / no_opendir /
// no_flush), keeping page and readdir caches across opens. Every permission decision that an OPEN would
// have carried is made elsewhere: at lookup (none), in the mode bits the kernel enforces with
// default_permissions, and again here at read/write/setattr.
import { performance } from 'node:perf_hooks';
import type { LowLevelHandlers, Req } from '@agentfense/fuse-native';
import { FsError, toErrno } from '../errors.js';
import type { OpStats } from './op-stats.js';
import { renameNodes } from './rename-nodes.js';
import type { Caller, PolicyFs } from './policy-fs.js';
import type { EntryReply, NegativeEntry } from './types.js';

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * A file name from the kernel as a string. Names must be valid UTF-8 (rules, JSON and the wire protocol
 * are text): anything else is refused rather than silently mangled into another name.
 */
function nameOf(raw: Buffer): string {
  try {
    return decoder.decode(raw);
  } catch {
    throw new FsError('EINVAL', 'file names must be valid UTF-8');
  }
}

function callerOf(req: Req): Caller {
  return { pid: req.pid, uid: req.uid, gid: req.gid };
}

export interface BindingOptions {
  readonly fs: PolicyFs;
  readonly stats: OpStats;
  /** Seconds the kernel may cache attributes it gets from getattr/setattr. */
  readonly attrTimeout: number;
  /** Unexpected failures (EIO) are reported here. */
  readonly onInternalError: (op: string, err: unknown) => void;
  /** Besides root, the only caller uid served (MountParams.callerUid); absent: any. */
  readonly callerUid?: number | undefined;
}

/**
 * The ops that may change what a listing or an entry's attributes say: each one, at its start and its end,
 * ends every remembered READDIRPLUS answer (listing-replay.ts). Failed ones too (a partial change).
 */
const MUTATING: ReadonlySet<string> = new Set([
  'setattr',
  'mknod',
  'mkdir',
  'unlink',
  'rmdir',
  'symlink',
  'rename',
  'link',
  'write',
  'fallocate',
  'create',
  'setxattr',
  'removexattr',
]);

/** A LOOKUP's answer; ino 0: a negative entry the kernel caches (the name does not exist at all). */
function replyLookup(req: Req, entry: EntryReply | NegativeEntry): void {
  req.replyEntry(
    'attr' in entry ? entry : { ino: 0, attr: { ino: 0, mode: 0 }, entryTimeout: entry.entryTimeout },
  );
}

/** Builds the handler table the binding calls. */
export function createHandlers(options: BindingOptions): LowLevelHandlers {
  const { fs, stats, attrTimeout, callerUid } = options;

  /** Runs one op: reply on success, errno on failure, and count it. */
  const serve = (op: string, req: Req, work: () => Promise<void> | void): Promise<void> | void => {
    const started = performance.now();
    // The entry warm-up gives way while the sandbox has requests in flight (fs/entry-warmup.ts).
    const warmup = fs.entryWarmup?.requestStarted(req.pid, req.uid) === true ? fs.entryWarmup : undefined;
    const mutating = MUTATING.has(op);
    if (mutating) fs.mutated();
    const fail = (err: unknown): void => {
      warmup?.requestEnded();
      if (mutating) fs.mutated();
      const errno = toErrno(err);
      if (!(err instanceof FsError)) options.onInternalError(op, err);
      if (!req.replied) req.replyErr(errno);
      stats.record(op, (performance.now() - started) * 1000, true);
    };
    const done = (): void => {
      warmup?.requestEnded();
      if (mutating) fs.mutated();
      stats.record(op, (performance.now() - started) * 1000, false);
    };
    try {
      // Another uid than the sandbox's own or root: refused before the op looks at anything.
      if (callerUid !== undefined && req.uid !== callerUid && req.uid !== 0) {
        throw new FsError('EACCES', `uid ${String(req.uid)} is not this sandbox's`);
      }
      const pending = work();
      if (pending === undefined) {
        done();
        return;
      }
      return pending.then(done, fail);
    } catch (err) {
      fail(err);
    }
  };

  return {
    lookup: (req, parent, name) =>
      serve('lookup', req, () => {
        // Answered without a promise where the worker needs no thread-pool trip (most LOOKUPs).
        const entry = fs.lookup(parent, nameOf(name), callerOf(req));
        if (!(entry instanceof Promise)) {
          replyLookup(req, entry);
          return;
        }
        return entry.then((e) => {
          replyLookup(req, e);
        });
      }),
    forget: (ino, nlookup) => {
      fs.forget(ino, nlookup);
    },
    getattr: (req, ino) =>
      serve('getattr', req, async () => {
        req.replyAttr(await fs.getattr(ino, callerOf(req)), attrTimeout);
      }),
    setattr: (req, ino, changes) =>
      serve('setattr', req, () => {
        // Without a promise where the delta changes the entry at once (a mode or times, as after `tar -x`).
        const attr = fs.setattr(ino, changes, callerOf(req));
        if (!(attr instanceof Promise)) {
          req.replyAttr(attr, attrTimeout);
          return;
        }
        return attr.then((a) => {
          req.replyAttr(a, attrTimeout);
        });
      }),
    readlink: (req, ino) =>
      serve('readlink', req, async () => {
        req.replyReadlink(await fs.readlink(ino, callerOf(req)));
      }),
    mknod: (req, parent, name, mode, rdev) =>
      serve('mknod', req, async () => {
        req.replyEntry(await fs.mknod(parent, nameOf(name), mode, rdev, callerOf(req)));
      }),
    mkdir: (req, parent, name, mode) =>
      serve('mkdir', req, async () => {
        req.replyEntry(await fs.mkdir(parent, nameOf(name), mode, callerOf(req)));
      }),
    unlink: (req, parent, name) =>
      serve('unlink', req, async () => {
        await fs.unlink(parent, nameOf(name), callerOf(req));
        req.replyErr(0);
      }),
    rmdir: (req, parent, name) =>
      serve('rmdir', req, async () => {
        await fs.rmdir(parent, nameOf(name), callerOf(req));
        req.replyErr(0);
      }),
    symlink: (req, target, parent, name) =>
      serve('symlink', req, async () => {
        req.replyEntry(await fs.symlink(nameOf(target), parent, nameOf(name), callerOf(req)));
      }),
    rename: (req, parent, name, newParent, newName) =>
      serve('rename', req, async () => {
        const from = { parent, name: nameOf(name) };
        const to = { parent: newParent, name: nameOf(newName) };
        // before anything changes: what the binding's fast paths keep through it
        const nodes = renameNodes(fs.inodes, from, to);
        req.settleRename(nodes.moved, nodes.replaced);
        await fs.rename(from.parent, from.name, to.parent, to.name, callerOf(req));
        req.replyErr(0);
      }),
    link: (req, ino, newParent, newName) =>
      serve('link', req, async () => {
        req.replyEntry(await fs.link(ino, newParent, nameOf(newName), callerOf(req)));
      }),
    read: (req, ino, size, offset) =>
      serve('read', req, () => fs.readReply(ino, size, offset, callerOf(req), (data) => req.replyBuf(data))),
    write: (req, ino, data, offset) =>
      serve('write', req, () => {
        // Without a promise where the file is open (fs.writeIfOpen): most WRITEs, each one's await and
        // microtasks saved.
        const caller = callerOf(req);
        const written = fs.writeIfOpen(ino, data, offset, caller);
        if (written !== undefined) {
          req.replyWrite(written);
          return;
        }
        return fs.write(ino, data, offset, caller).then((n) => {
          req.replyWrite(n);
        });
      }),
    fallocate: (req, ino, mode, offset, length) =>
      serve('fallocate', req, async () => {
        await fs.fallocate(ino, mode, offset, length, callerOf(req));
        req.replyErr(0);
      }),
    fsync: (req, ino, datasync) =>
      serve('fsync', req, async () => {
        await fs.fsync(ino, datasync);
        req.replyErr(0);
      }),
    readdir: (req, ino, size, offset) =>
      serve('readdir', req, async () => {
        // a struct fuse_dirent with its name takes at least 32 bytes: no more entries than that can fit
        req.replyDirents(await fs.readdir(ino, offset, callerOf(req), Math.max(1, Math.floor(size / 32))));
      }),
    // Asked for by the kernel only when the mount got READDIRPLUS (mount-options.ts).
    readdirplus: (req, ino, _size, offset) =>
      serve('readdirplus', req, async () => {
        // packed by the worker (fs/direntplus-pack.ts), so an answer can be kept and handed again
        req.replyBuf(await fs.readdirplus(ino, offset, callerOf(req), (names) => req.fitDirentsPlus(names)));
      }),
    statfs: (req) =>
      serve('statfs', req, () => {
        req.replyStatfs(fs.statfs());
      }),
    access: (req, ino, mask) =>
      serve('access', req, async () => {
        await fs.access(ino, mask, callerOf(req));
        req.replyErr(0);
      }),
    create: (req, parent, name, mode, flags) =>
      serve('create', req, async () => {
        // keepCache: a created file's pages are ours; the kernel keeps them across later opens.
        const entry = await fs.create(parent, nameOf(name), mode, flags, callerOf(req));
        req.replyCreate(entry, { keepCache: true, directIo: entry.directIo });
      }),
    setxattr: (req, ino, name) =>
      serve('setxattr', req, () => {
        fs.xattrSet(ino, name, callerOf(req));
      }),
    removexattr: (req, ino, name) =>
      serve('removexattr', req, () => {
        fs.xattrSet(ino, name, callerOf(req));
      }),
  };
}
