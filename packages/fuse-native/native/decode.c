/* Decoding: libfuse's low-level callbacks, run on the JS thread inside on_poll while libfuse parses
 * a request. Each copies its arguments into one record and queues it; an op without a JS handler is
 * answered here without entering JS. */
#include "ll.h"
#include "fast-entries.h"
#include "fast-create.h"
#include "fast-unlink.h"
#include "fast-rmdir.h"
#include "fast-listing.h"
#include "fast-rename.h"

/* Names are copied NUL-terminated after the header; `at` is the running offset in buf. */
static const char *copy_name(ll_msg *m, size_t *at, const char *src, size_t *len_out) {
  size_t len = strlen(src);
  char *dst = m->buf + *at;
  memcpy(dst, src, len + 1);
  *at += len + 1;
  *len_out = len;
  return dst;
}

#define SESS(req) ((ll_session *) fuse_req_userdata(req))
#define HAS(s, op) ((s)->implemented & (1ull << (op)))
/* An unimplemented op is answered here, while decoding, without calling into JS. */
#define NEED(op) do { if (!HAS(SESS(req), op)) { fuse_reply_err(req, ENOSYS); return; } } while (0)
#define ALLOC(m, req, op, extra) ll_msg *m = msg_new(req, op, extra); if (!m) { fuse_reply_err(req, ENOMEM); return; }

static void ll_init(void *userdata, struct fuse_conn_info *conn) {
  ll_session *s = userdata;
  /* Exactly the capabilities we decided on, never libfuse's defaults: it would switch on
   * ATOMIC_O_TRUNC (the kernel would then assume OPEN truncated, but we answer OPEN with ENOSYS),
   * HANDLE_KILLPRIV (the kernel would stop clearing set-id bits on write) and AUTO_INVAL_DATA. */
  unsigned want = 0;
#define WANT_IF(feat, cap) if ((s->features & (feat)) && (conn->capable & (cap))) want |= (cap)
  if (conn->capable & FUSE_CAP_ASYNC_READ) want |= FUSE_CAP_ASYNC_READ;
  WANT_IF(FEAT_WRITEBACK_CACHE, FUSE_CAP_WRITEBACK_CACHE);
  WANT_IF(FEAT_READDIRPLUS, FUSE_CAP_READDIRPLUS);
  WANT_IF(FEAT_PARALLEL_DIROPS, FUSE_CAP_PARALLEL_DIROPS);
  WANT_IF(FEAT_CACHE_SYMLINKS, FUSE_CAP_CACHE_SYMLINKS);
  WANT_IF(FEAT_ASYNC_DIO, FUSE_CAP_ASYNC_DIO);
#undef WANT_IF
  conn->want = want;
  /* libfuse derives max_pages from max_write (when the kernel offers FUSE_MAX_PAGES, protocol
   * 7.28+): 1 MiB of max_write means 256-page READ/WRITE requests. Its buffer caps it at 1 MiB. */
  if (s->max_write_wanted && s->max_write_wanted < conn->max_write) conn->max_write = s->max_write_wanted;
  s->proto_major = conn->proto_major;
  s->proto_minor = conn->proto_minor;
  s->max_write = conn->max_write;
  s->max_readahead = conn->max_readahead;
  s->capable = conn->capable;
  s->want = conn->want;
  ll_msg *m = msg_new(NULL, EV_INIT, 0);
  if (m) { m->s = s; queue_push(s, m); }
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  NEED(OP_LOOKUP);
  if (fentry_lookup(SESS(req), req, parent, name)) return;
  size_t at = 0;
  ALLOC(m, req, OP_LOOKUP, strlen(name) + 1);
  m->ino = parent;
  m->name = copy_name(m, &at, name, &m->namelen);
  queue_push(m->s, m);
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, unsigned long nlookup) {
  ll_session *s = SESS(req);
  fuse_reply_none(req); /* FORGET has no reply; this only frees libfuse's request */
  if (!HAS(s, OP_FORGET)) return;
  ll_msg *m = msg_new(NULL, OP_FORGET, 0);
  if (!m) return;
  m->s = s; m->ino = ino; m->off = nlookup;
  queue_push(s, m);
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets) {
  ll_session *s = SESS(req);
  if (!HAS(s, OP_FORGET)) { fuse_reply_none(req); return; }
  ll_msg *m = msg_new(NULL, OP_FORGET_MULTI, 0);
  double *pairs = m ? malloc(count * 2 * sizeof(double) + 1) : NULL;
  if (m && pairs) {
    for (size_t i = 0; i < count; i++) {
      pairs[2 * i] = (double) forgets[i].ino;
      pairs[2 * i + 1] = (double) forgets[i].nlookup;
    }
    m->s = s; m->data = (char *) pairs; m->datalen = count * 2 * sizeof(double);
    queue_push(s, m);
  } else {
    free(m); free(pairs);
  }
  fuse_reply_none(req); /* after the copy: forgets points into the request */
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  NEED(OP_GETATTR);
  if (fcreate_getattr(SESS(req), req, ino)) return;
  ALLOC(m, req, OP_GETATTR, 0);
  m->ino = ino;
  if (fi) { m->fh = fi->fh; m->has_fh = 1; }
  queue_push(m->s, m);
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
  NEED(OP_SETATTR);
  if (fcreate_setattr(SESS(req), req, ino, attr, to_set)) return;
  fast_forget_ino(SESS(req), ino);
  ALLOC(m, req, OP_SETATTR, 0);
  m->ino = ino;
  m->flags = (uint32_t) to_set;
  m->mode = attr->st_mode;
  m->sa_uid = attr->st_uid;
  m->sa_gid = attr->st_gid;
  m->size = (uint64_t) attr->st_size;
  m->sa_atime = attr->st_atim;
  m->sa_mtime = attr->st_mtim;
  if (fi) { m->fh = fi->fh; m->has_fh = 1; }
  queue_push(m->s, m);
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino) {
  NEED(OP_READLINK);
  ALLOC(m, req, OP_READLINK, 0);
  m->ino = ino;
  queue_push(m->s, m);
}

static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev) {
  NEED(OP_MKNOD);
  size_t at = 0;
  ALLOC(m, req, OP_MKNOD, strlen(name) + 1);
  m->ino = parent; m->mode = mode; m->off = rdev;
  m->name = copy_name(m, &at, name, &m->namelen);
  queue_push(m->s, m);
}

static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
  NEED(OP_MKDIR);
  size_t at = 0;
  ALLOC(m, req, OP_MKDIR, strlen(name) + 1);
  m->ino = parent; m->mode = mode;
  m->name = copy_name(m, &at, name, &m->namelen);
  queue_push(m->s, m);
}

static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
  NEED(OP_UNLINK);
  fast_invalidate(SESS(req));
  if (funlink_unlink(SESS(req), req, parent, name)) return;
  size_t at = 0;
  ALLOC(m, req, OP_UNLINK, strlen(name) + 1);
  m->ino = parent;
  m->name = copy_name(m, &at, name, &m->namelen);
  queue_push(m->s, m);
}

static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) {
  NEED(OP_RMDIR);
  fast_invalidate(SESS(req));
  if (frmdir_rmdir(SESS(req), req, parent, name)) return;
  size_t at = 0;
  ALLOC(m, req, OP_RMDIR, strlen(name) + 1);
  m->ino = parent;
  m->name = copy_name(m, &at, name, &m->namelen);
  queue_push(m->s, m);
}

static void ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name) {
  NEED(OP_SYMLINK);
  size_t at = 0;
  ALLOC(m, req, OP_SYMLINK, strlen(name) + strlen(link) + 2);
  m->ino = parent;
  m->name = copy_name(m, &at, name, &m->namelen);
  m->name2 = copy_name(m, &at, link, &m->name2len);
  queue_push(m->s, m);
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname, unsigned int flags) {
  NEED(OP_RENAME);
  /* renameat2 flags (RENAME_NOREPLACE/EXCHANGE/WHITEOUT) are not implemented: ENOSYS makes the kernel
   * answer EINVAL for them from now on (no_rename2), as it did under protocol 7.19. */
  if (flags) { fuse_reply_err(req, ENOSYS); return; }
  int ends = frename_decode(SESS(req), parent, name);
  size_t at = 0;
  ALLOC(m, req, OP_RENAME, strlen(name) + strlen(newname) + 2);
  m->ino = parent; m->ino2 = newparent;
  m->rename_ends = ends;
  m->name = copy_name(m, &at, name, &m->namelen);
  m->name2 = copy_name(m, &at, newname, &m->name2len);
  queue_push(m->s, m);
}

static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname) {
  NEED(OP_LINK);
  fast_invalidate(SESS(req));
  fast_read_invalidate(SESS(req));
  size_t at = 0;
  ALLOC(m, req, OP_LINK, strlen(newname) + 1);
  m->ino = ino; m->ino2 = newparent;
  m->name = copy_name(m, &at, newname, &m->namelen);
  queue_push(m->s, m);
}

/* libfuse answers OPEN/OPENDIR with success when the op is NULL, so we register them and
 * answer ENOSYS ourselves: that is what makes the kernel set no_open/no_opendir. */
static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  NEED(OP_OPEN);
  ALLOC(m, req, OP_OPEN, 0);
  m->ino = ino; m->flags = (uint32_t) fi->flags;
  queue_push(m->s, m);
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  NEED(OP_READ);
  if (fast_read(SESS(req), req, ino, size, off)) return;
  ALLOC(m, req, OP_READ, 0);
  m->ino = ino; m->size = size; m->off = (uint64_t) off; m->fh = fi->fh; m->has_fh = 1;
  queue_push(m->s, m);
}

/* WRITE payloads from this size on are handed over with the receive buffer instead of copied. */
#define WRITE_HANDOVER_MIN (64 * 1024)

static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
  NEED(OP_WRITE);
  if (fast_write(SESS(req), req, ino, buf, size, off)) return;
  ALLOC(m, req, OP_WRITE, 0);
  ll_session *s = m->s;
  char *base = s->rbuf.mem;
  char *fresh = NULL;
  if (size >= WRITE_HANDOVER_MIN && base != NULL && buf >= base && buf + size <= base + s->rbuf.size) {
    /* The largest buffer libfuse ever reads into: FUSE_MAX_MAX_PAGES pages + its header room. */
    fresh = s->spare != NULL ? s->spare : malloc(256 * (size_t) sysconf(_SC_PAGESIZE) + 4096);
    s->spare = NULL;
  }
  if (fresh != NULL) {
    /* A big payload (up to 1 MiB with max_pages): hand libfuse's whole receive buffer to JS instead of
     * copying it, and give libfuse a fresh one to read the next request into. libfuse does not touch
     * the old buffer after this callback returns. */
    m->data = (char *) buf;
    m->data_base = base;
    s->rbuf.mem = fresh;
  } else {
    /* buf is libfuse's receive buffer, reused for the next request: copy now, on this thread. */
    m->data = malloc(size ? size : 1);
    if (!m->data) { free(m); fuse_reply_err(req, ENOMEM); return; }
    memcpy(m->data, buf, size);
  }
  m->datalen = size;
  m->ino = ino; m->off = (uint64_t) off; m->fh = fi->fh; m->has_fh = 1;
  queue_push(m->s, m);
}

static void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  NEED(OP_FLUSH);
  ALLOC(m, req, OP_FLUSH, 0);
  m->ino = ino; m->fh = fi->fh; m->has_fh = 1;
  queue_push(m->s, m);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if (!HAS(SESS(req), OP_RELEASE)) { fuse_reply_err(req, 0); return; } /* nothing to release */
  ALLOC(m, req, OP_RELEASE, 0);
  m->ino = ino; m->fh = fi->fh; m->has_fh = 1; m->flags = (uint32_t) fi->flags;
  queue_push(m->s, m);
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
  NEED(OP_FSYNC);
  ALLOC(m, req, OP_FSYNC, 0);
  m->ino = ino; m->flags = (uint32_t) datasync; m->fh = fi->fh; m->has_fh = 1;
  queue_push(m->s, m);
}

static void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  NEED(OP_OPENDIR);
  ALLOC(m, req, OP_OPENDIR, 0);
  m->ino = ino; m->flags = (uint32_t) fi->flags;
  queue_push(m->s, m);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  NEED(OP_READDIR);
  if (flist_readdir(SESS(req), req, ino, size, (uint64_t) off, 0)) return;
  ALLOC(m, req, OP_READDIR, 0);
  m->ino = ino; m->size = size; m->off = (uint64_t) off; m->fh = fi->fh; m->has_fh = 1;
  queue_push(m->s, m);
}

static void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  NEED(OP_READDIRPLUS);
  if (flist_readdir(SESS(req), req, ino, size, (uint64_t) off, 1)) return;
  ALLOC(m, req, OP_READDIRPLUS, 0);
  m->ino = ino; m->size = size; m->off = (uint64_t) off; m->fh = fi->fh; m->has_fh = 1;
  queue_push(m->s, m);
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if (!HAS(SESS(req), OP_RELEASEDIR)) { fuse_reply_err(req, 0); return; }
  ALLOC(m, req, OP_RELEASEDIR, 0);
  m->ino = ino; m->fh = fi->fh; m->has_fh = 1;
  queue_push(m->s, m);
}

static void ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
  NEED(OP_FSYNCDIR);
  ALLOC(m, req, OP_FSYNCDIR, 0);
  m->ino = ino; m->flags = (uint32_t) datasync; m->fh = fi->fh; m->has_fh = 1;
  queue_push(m->s, m);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino) {
  if (!HAS(SESS(req), OP_STATFS)) {
    /* Same default libfuse uses when statfs is not implemented (df must not fail). */
    struct statvfs buf;
    memset(&buf, 0, sizeof(buf));
    buf.f_namemax = 255;
    buf.f_bsize = 512;
    fuse_reply_statfs(req, &buf);
    return;
  }
  ALLOC(m, req, OP_STATFS, 0);
  m->ino = ino;
  queue_push(m->s, m);
}

static void ll_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size, int flags) {
  NEED(OP_SETXATTR);
  if (fcreate_setxattr(SESS(req), req, ino)) return;
  size_t at = 0;
  ALLOC(m, req, OP_SETXATTR, strlen(name) + 1);
  m->data = malloc(size ? size : 1);
  if (!m->data) { free(m); fuse_reply_err(req, ENOMEM); return; }
  memcpy(m->data, value, size);
  m->datalen = size;
  m->ino = ino; m->flags = (uint32_t) flags;
  m->name = copy_name(m, &at, name, &m->namelen);
  queue_push(m->s, m);
}

static void ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
  NEED(OP_GETXATTR);
  size_t at = 0;
  ALLOC(m, req, OP_GETXATTR, strlen(name) + 1);
  m->ino = ino; m->size = size;
  m->name = copy_name(m, &at, name, &m->namelen);
  queue_push(m->s, m);
}

static void ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  NEED(OP_LISTXATTR);
  ALLOC(m, req, OP_LISTXATTR, 0);
  m->ino = ino; m->size = size;
  queue_push(m->s, m);
}

static void ll_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name) {
  NEED(OP_REMOVEXATTR);
  if (fcreate_setxattr(SESS(req), req, ino)) return;
  size_t at = 0;
  ALLOC(m, req, OP_REMOVEXATTR, strlen(name) + 1);
  m->ino = ino;
  m->name = copy_name(m, &at, name, &m->namelen);
  queue_push(m->s, m);
}

static void ll_access(fuse_req_t req, fuse_ino_t ino, int mask) {
  NEED(OP_ACCESS);
  ALLOC(m, req, OP_ACCESS, 0);
  m->ino = ino; m->flags = (uint32_t) mask;
  queue_push(m->s, m);
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
  NEED(OP_CREATE);
  if (fcreate_create(SESS(req), req, parent, name, mode, fi->flags)) return;
  size_t at = 0;
  ALLOC(m, req, OP_CREATE, strlen(name) + 1);
  m->ino = parent; m->mode = mode; m->flags = (uint32_t) fi->flags;
  m->name = copy_name(m, &at, name, &m->namelen);
  queue_push(m->s, m);
}

/* fallocate(2) on an open file: mode is FALLOC_FL_*; offset and length are exact 64-bit values. */
static void ll_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length, struct fuse_file_info *fi) {
  NEED(OP_FALLOCATE);
  fast_forget_ino(SESS(req), ino);
  ALLOC(m, req, OP_FALLOCATE, 0);
  m->ino = ino; m->flags = (uint32_t) mode; m->off = (uint64_t) offset; m->size = (uint64_t) length;
  if (fi) { m->fh = fi->fh; m->has_fh = 1; }
  queue_push(m->s, m);
}

const struct fuse_lowlevel_ops ll_ops = {
  .init = ll_init,
  .lookup = ll_lookup,
  .forget = ll_forget,
  .getattr = ll_getattr,
  .setattr = ll_setattr,
  .readlink = ll_readlink,
  .mknod = ll_mknod,
  .mkdir = ll_mkdir,
  .unlink = ll_unlink,
  .rmdir = ll_rmdir,
  .symlink = ll_symlink,
  .rename = ll_rename,
  .link = ll_link,
  .open = ll_open,
  .read = ll_read,
  .write = ll_write,
  .flush = ll_flush,
  .release = ll_release,
  .fsync = ll_fsync,
  .opendir = ll_opendir,
  .readdir = ll_readdir,
  .releasedir = ll_releasedir,
  .fsyncdir = ll_fsyncdir,
  .statfs = ll_statfs,
  .setxattr = ll_setxattr,
  .getxattr = ll_getxattr,
  .listxattr = ll_listxattr,
  .removexattr = ll_removexattr,
  .access = ll_access,
  .create = ll_create,
  .forget_multi = ll_forget_multi,
  .fallocate = ll_fallocate,
  .readdirplus = ll_readdirplus,
};
