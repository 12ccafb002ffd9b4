/*
 * floor-fs: the fastest a FUSE daemon can answer the data lines of `pnpm bench:fs`, for
 * `pnpm bench:fs-floor` (floor.bench.js compiles and runs it; never part of the product).
 *
 * Why it exists: the 100 MiB write's target is 2x native. Before building a C fast path for
 * WRITE into the worker's binding (a registered inode answered in C, with a splice of the payload from
 * /dev/fuse into the backing file), this measures what such a path could reach at best: a C libfuse 3.14
 * daemon (the library the binding links) with no JS, no permission check, no quota, nothing but the data
 * path. If a line misses its target here, no worker can meet it with the same kernel data path.
 *
 * The first-stat line (the first os.stat of a file in a fresh mount: one LOOKUP round trip) uses it
 * too: LOOKUP and GETATTR work at any depth below the backing directory, so it serves bench:fs's tree
 * (tree/dNN/fNN.txt). Every name the kernel learns gets an inode number from a hash table keyed by (parent
 * inode, name); the data ops (create, unlink) stay in the backing directory's top level, as the data lines
 * need nothing more. Entry and attribute timeouts are 60 s, as the worker's. Flags:
 *   --splice-read   FUSE_CAP_SPLICE_READ + write_buf: a WRITE's payload stays in a pipe and is spliced
 *                   into the backing fd (the kernel references the FUSE page-cache pages into the pipe
 *                   instead of copying them into the daemon's buffer). The request must fit a pipe, so
 *                   pass --max-write 1044480 (see floor.bench.js).
 *   --discard       WRITE is answered at once and its payload dropped: the protocol's own cost.
 *   --direct-io     files created O_WRONLY are opened with FOPEN_DIRECT_IO: the writer's pages go to the
 *                   daemon without passing through the FUSE inode's page cache.
 *   --splice-write  READ replies spliced from the backing fd (FUSE_CAP_SPLICE_WRITE|MOVE).
 *   --max-write N   max_write (libfuse derives max_pages from it).
 *   --table         at start, every entry below the backing directory is stat'ed into the table; LOOKUP
 *                   and GETATTR are then answered from it with no syscall on the host: the pure round
 *                   trip, the floor of any daemon. For a read-only tree only (writes do not update it).
 * Without --splice-read a WRITE's payload is read with its request into libfuse's reused buffer and
 * pwrite()n: the copies the worker makes, without the JS. Without --table a LOOKUP is one fstatat of the
 * entry's path below the backing directory fd (the host's dcache is warm in the bench): the worker's
 * lstat, without the JS.
 */
#define FUSE_USE_VERSION 314
#define _GNU_SOURCE
#include <fuse_lowlevel.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NODES (1 << 16)
#define BUCKETS (1 << 17)

static int backing = -1;
static int devnull = -1;
static int splice_read, discard, direct_io, splice_write, table;
static unsigned max_write;
static char read_buf[1 << 20];

/* Inode n is nodes[n]; inode 1 is the backing directory. Chained by bucket (0 ends a chain). */
struct node {
  fuse_ino_t parent;
  char *name;
  char *path; /* relative to the backing directory fd, for fstatat/openat */
  struct stat st; /* --table: the entry's attributes, taken at start */
  unsigned next;
};
static struct node nodes[MAX_NODES];
static unsigned bucket[BUCKETS];
static unsigned nnodes = 2;

static unsigned hash_of(fuse_ino_t parent, const char *name) {
  uint64_t h = 1469598103934665603ull ^ parent; /* FNV-1a over the parent inode, then the name */
  for (const unsigned char *p = (const unsigned char *) name; *p != 0; p++) h = (h ^ *p) * 1099511628211ull;
  return (unsigned) (h ^ (h >> 32)) & (BUCKETS - 1);
}

static const char *path_of(fuse_ino_t ino) { return nodes[ino].path; }

static fuse_ino_t find(fuse_ino_t parent, const char *name) {
  for (unsigned i = bucket[hash_of(parent, name)]; i != 0; i = nodes[i].next)
    if (nodes[i].parent == parent && strcmp(nodes[i].name, name) == 0) return i;
  return 0;
}

/* The inode of (parent, name), added if new; 0 when the table is full or the parent is unknown. */
static fuse_ino_t ino_of(fuse_ino_t parent, const char *name) {
  fuse_ino_t ino = find(parent, name);
  if (ino != 0 || nnodes == MAX_NODES || parent >= nnodes) return ino;
  struct node *n = &nodes[nnodes];
  n->parent = parent;
  n->name = strdup(name);
  if (parent == 1) n->path = strdup(name);
  else if (asprintf(&n->path, "%s/%s", nodes[parent].path, name) < 0) n->path = NULL;
  if (n->name == NULL || n->path == NULL) return 0;
  unsigned h = hash_of(parent, name);
  n->next = bucket[h];
  bucket[h] = nnodes;
  return nnodes++;
}

static int stat_of(fuse_ino_t ino, struct stat *st) {
  if (table) *st = nodes[ino].st;
  else if (fstatat(backing, path_of(ino), st, AT_SYMLINK_NOFOLLOW) != 0) return errno;
  st->st_ino = ino;
  return 0;
}

/* --table: every entry below the directory `parent` (depth first), its attributes taken now. */
static void load_table(fuse_ino_t parent) {
  int fd = openat(backing, path_of(parent), O_DIRECTORY | O_RDONLY | O_NOFOLLOW);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (d == NULL) {
    if (fd >= 0) close(fd);
    return;
  }
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    fuse_ino_t ino = ino_of(parent, e->d_name);
    if (ino == 0 || fstatat(backing, path_of(ino), &nodes[ino].st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(nodes[ino].st.st_mode)) load_table(ino);
  }
  closedir(d);
}

static void reply_entry(fuse_req_t req, fuse_ino_t parent, const char *name, struct fuse_file_info *fi) {
  struct fuse_entry_param e;
  memset(&e, 0, sizeof e);
  /* --table knows every entry: a name it lacks does not exist (no host syscall either way). */
  e.ino = table && fi == NULL ? find(parent, name) : ino_of(parent, name);
  int err = e.ino == 0 ? (table && fi == NULL ? ENOENT : ENOSPC) : stat_of(e.ino, &e.attr);
  if (err != 0) {
    fuse_reply_err(req, err);
    return;
  }
  e.attr_timeout = e.entry_timeout = 60;
  if (fi != NULL) fuse_reply_create(req, &e, fi);
  else fuse_reply_entry(req, &e);
}

static void f_init(void *userdata, struct fuse_conn_info *conn) {
  (void) userdata;
  conn->want = FUSE_CAP_ASYNC_READ;
  if (splice_read) conn->want |= FUSE_CAP_SPLICE_READ;
  if (splice_write) conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
  if (max_write != 0) conn->max_write = max_write;
  conn->max_readahead = 1 << 20; /* as the worker (readahead-window.ts) */
  fprintf(stderr, "floor-fs: protocol 7.%u, max_write %u, want %#x\n", conn->proto_minor, conn->max_write,
          conn->want);
}

static void f_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  reply_entry(req, parent, name, NULL);
}

static void f_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void) fi;
  struct stat st;
  int err = stat_of(ino, &st);
  if (err != 0) fuse_reply_err(req, err);
  else fuse_reply_attr(req, &st, 60);
}

static void f_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
  if (to_set & FUSE_SET_ATTR_SIZE) {
    int fd = openat(backing, path_of(ino), O_WRONLY);
    int err = fd < 0 || ftruncate(fd, attr->st_size) != 0 ? errno : 0;
    if (fd >= 0) close(fd);
    if (err != 0) {
      fuse_reply_err(req, err);
      return;
    }
  }
  f_getattr(req, ino, fi);
}

static void f_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
  if (parent != 1) {
    fuse_reply_err(req, EROFS); /* the data lines write only to the top level */
    return;
  }
  int fd = openat(backing, name, (fi->flags & ~O_NOFOLLOW) | O_CREAT | O_NOFOLLOW, mode);
  if (fd < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  fi->fh = (uint64_t) fd;
  fi->direct_io = direct_io && (fi->flags & O_ACCMODE) == O_WRONLY;
  reply_entry(req, parent, name, fi);
}

static void f_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  int fd = openat(backing, path_of(ino), fi->flags & ~(O_CREAT | O_TRUNC | O_EXCL));
  if (fd < 0) {
    fuse_reply_err(req, errno);
    return;
  }
  fi->fh = (uint64_t) fd;
  fi->keep_cache = 1; /* as the worker (no_open: the kernel keeps pages across opens) */
  fuse_reply_open(req, fi);
}

static void f_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  (void) ino;
  if (splice_write) {
    struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
    bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    bv.buf[0].fd = (int) fi->fh;
    bv.buf[0].pos = off;
    fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
    return;
  }
  if (size > sizeof read_buf) size = sizeof read_buf;
  ssize_t n = pread((int) fi->fh, read_buf, size, off);
  if (n < 0) fuse_reply_err(req, errno);
  else fuse_reply_buf(req, read_buf, (size_t) n);
}

static void f_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                    struct fuse_file_info *fi) {
  (void) ino;
  ssize_t n = discard ? (ssize_t) size : pwrite((int) fi->fh, buf, size, off);
  if (n < 0) fuse_reply_err(req, errno);
  else fuse_reply_write(req, (size_t) n);
}

static void f_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
                        struct fuse_file_info *fi) {
  (void) ino;
  /* The pipe must be emptied either way: --discard splices it into /dev/null. */
  struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
  out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
  out.buf[0].fd = discard ? devnull : (int) fi->fh;
  out.buf[0].pos = discard ? 0 : off;
  ssize_t n = fuse_buf_copy(&out, in, 0);
  if (n < 0) fuse_reply_err(req, (int) -n);
  else fuse_reply_write(req, (size_t) n);
}

static void f_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void) ino;
  (void) fi;
  fuse_reply_err(req, ENOSYS); /* as the worker: no FLUSH on every close */
}

static void f_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  (void) ino;
  close((int) fi->fh);
  fuse_reply_err(req, 0);
}

static void f_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
  (void) ino;
  int rc = datasync ? fdatasync((int) fi->fh) : fsync((int) fi->fh);
  fuse_reply_err(req, rc != 0 ? errno : 0);
}

static void f_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
  if (parent != 1) {
    fuse_reply_err(req, EROFS);
    return;
  }
  fuse_reply_err(req, unlinkat(backing, name, 0) != 0 ? errno : 0);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: floor-fs BACKING_DIR MOUNTPOINT [--splice-read] [--discard] [--direct-io] "
                    "[--splice-write] [--max-write N] [--table]\n");
    return 2;
  }
  for (int i = 3; i < argc; i++) {
    if (strcmp(argv[i], "--splice-read") == 0) splice_read = 1;
    else if (strcmp(argv[i], "--discard") == 0) discard = 1;
    else if (strcmp(argv[i], "--direct-io") == 0) direct_io = 1;
    else if (strcmp(argv[i], "--splice-write") == 0) splice_write = 1;
    else if (strcmp(argv[i], "--table") == 0) table = 1;
    else if (strcmp(argv[i], "--max-write") == 0 && i + 1 < argc) max_write = (unsigned) atoi(argv[++i]);
    else {
      fprintf(stderr, "floor-fs: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  backing = open(argv[1], O_DIRECTORY | O_RDONLY);
  devnull = open("/dev/null", O_WRONLY);
  if (backing < 0 || devnull < 0) {
    perror("floor-fs: open");
    return 1;
  }
  nodes[1].path = ".";
  if (fstat(backing, &nodes[1].st) != 0) return 1;
  if (table) load_table(1);
  struct fuse_lowlevel_ops ops = {
    .init = f_init, .lookup = f_lookup, .getattr = f_getattr, .setattr = f_setattr, .create = f_create,
    .open = f_open, .read = f_read, .flush = f_flush, .release = f_release, .fsync = f_fsync,
    .unlink = f_unlink,
  };
  if (splice_read) ops.write_buf = f_write_buf;
  else ops.write = f_write;
  char *fargv[] = { argv[0], "-o", "fsname=floor-fs,default_permissions", NULL };
  struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
  struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
  if (se == NULL || fuse_session_mount(se, argv[2]) != 0) return 1;
  int rc = fuse_session_loop(se); /* one thread, as the worker's one JS thread */
  fuse_session_unmount(se);
  fuse_session_destroy(se);
  return rc != 0 ? 1 : 0;
}
