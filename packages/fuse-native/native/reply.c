/* Replies: the functions JS answers a request with. Each marks the request answered (a second answer
 * throws) and sends it while the session lives. JS thread only. */
#include "ll.h"
#include "fast-rename.h"

static ll_msg *take_req(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok || !p) {
    napi_throw_type_error(env, NULL, "expected a FUSE request handle");
    return NULL;
  }
  ll_msg *m = p;
  if (m->replied) {
    napi_throw_error(env, "ERR_FUSE_DOUBLE_REPLY", "this FUSE request was already answered");
    return NULL;
  }
  return m;
}

/* Marks m answered and says whether the reply can actually be sent (session still open). */
static int mark_replied(ll_msg *m) {
  m->replied = 1;
  fast_after_reply(m);
  if (m->kind == OP_LINK) fast_read_invalidate(m->s);
  frename_after_reply(m);
  return session_live(m->s);
}

static void put_ts(double sec, double nsec, struct timespec *ts) {
  ts->tv_sec = (time_t) sec;
  ts->tv_nsec = (nsec >= 0 && nsec < 1e9) ? (long) nsec : 0;
}

/* scratch layout for attrs (src/encode.ts putAttr): ino mode nlink uid gid rdev sizeLow32 blocks blksize
 * atimeSec atimeNsec mtimeSec mtimeNsec ctimeSec ctimeNsec sizeHigh32. Times are full timespecs and the
 * size is split in two 32-bit halves so both cross exactly (a double holds neither). */
static void scratch_to_stat(const double *d, struct stat *st) {
  memset(st, 0, sizeof(*st));
  st->st_ino = (ino_t) d[0];
  st->st_mode = (mode_t) d[1];
  st->st_nlink = (nlink_t) d[2];
  st->st_uid = (uid_t) d[3];
  st->st_gid = (gid_t) d[4];
  st->st_rdev = (dev_t) d[5];
  st->st_size = (off_t) (((uint64_t) d[15] << 32) | (uint64_t) d[6]);
  st->st_blocks = (blkcnt_t) d[7];
  st->st_blksize = (blksize_t) d[8];
  put_ts(d[9], d[10], &st->st_atim);
  put_ts(d[11], d[12], &st->st_mtim);
  put_ts(d[13], d[14], &st->st_ctim);
}

#define REPLY_PROLOGUE(N) \
  size_t argc = N; napi_value argv[N]; \
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL; \
  if (argc < N) { napi_throw_type_error(env, NULL, "missing arguments"); return NULL; } \
  ll_msg *m = take_req(env, argv[0]); if (!m) return NULL;

static int arg_double(napi_env env, napi_value v, double *out) {
  if (napi_get_value_double(env, v, out) != napi_ok) {
    napi_throw_type_error(env, NULL, "expected a number");
    return 0;
  }
  return 1;
}

napi_value reply_err(napi_env env, napi_callback_info info) {
  REPLY_PROLOGUE(2)
  int32_t e;
  if (napi_get_value_int32(env, argv[1], &e) != napi_ok || e < 0) {
    napi_throw_type_error(env, NULL, "errno must be a non-negative integer");
    return NULL;
  }
  if (mark_replied(m)) fuse_reply_err(m->req, e);
  return NULL;
}

/* (h, ino, generation, entryTimeout, attrTimeout), attr in scratch */
static int fill_entry(napi_env env, napi_value *argv, ll_msg *m, struct fuse_entry_param *e) {
  double ino, gen, et, at;
  if (!arg_double(env, argv[1], &ino) || !arg_double(env, argv[2], &gen) ||
      !arg_double(env, argv[3], &et) || !arg_double(env, argv[4], &at)) return 0;
  memset(e, 0, sizeof(*e));
  e->ino = (fuse_ino_t) ino;
  e->generation = (unsigned long) gen;
  e->entry_timeout = et;
  e->attr_timeout = at;
  if (e->ino && session_live(m->s)) scratch_to_stat(m->s->scratch, &e->attr);
  return 1;
}

napi_value reply_entry(napi_env env, napi_callback_info info) {
  REPLY_PROLOGUE(5)
  struct fuse_entry_param e;
  if (!fill_entry(env, argv, m, &e)) return NULL;
  if (mark_replied(m)) fuse_reply_entry(m->req, &e);
  return NULL;
}

static int fill_open(napi_env env, napi_value fhv, napi_value bitsv, struct fuse_file_info *fi) {
  double fh;
  uint32_t bits;
  if (!arg_double(env, fhv, &fh)) return 0;
  if (napi_get_value_uint32(env, bitsv, &bits) != napi_ok) { napi_throw_type_error(env, NULL, "bad open flags"); return 0; }
  memset(fi, 0, sizeof(*fi));
  fi->fh = (uint64_t) fh;
  fi->direct_io = (bits & 1) ? 1 : 0;
  fi->keep_cache = (bits & 2) ? 1 : 0;
  fi->nonseekable = (bits & 4) ? 1 : 0;
  return 1;
}

/* (h, ino, generation, entryTimeout, attrTimeout, fh, openBits) */
napi_value reply_create(napi_env env, napi_callback_info info) {
  REPLY_PROLOGUE(7)
  struct fuse_entry_param e;
  struct fuse_file_info fi;
  if (!fill_entry(env, argv, m, &e) || !fill_open(env, argv[5], argv[6], &fi)) return NULL;
  if (mark_replied(m)) fuse_reply_create(m->req, &e, &fi);
  return NULL;
}

/* (h, attrTimeout), attr in scratch */
napi_value reply_attr(napi_env env, napi_callback_info info) {
  REPLY_PROLOGUE(2)
  double t;
  if (!arg_double(env, argv[1], &t)) return NULL;
  struct stat st;
  memset(&st, 0, sizeof(st));
  if (session_live(m->s)) scratch_to_stat(m->s->scratch, &st);
  if (mark_replied(m)) fuse_reply_attr(m->req, &st, t);
  return NULL;
}

/* (h, target: Buffer) */
napi_value reply_readlink(napi_env env, napi_callback_info info) {
  REPLY_PROLOGUE(2)
  void *p;
  size_t len;
  if (napi_get_buffer_info(env, argv[1], &p, &len) != napi_ok || memchr(p, 0, len)) {
    napi_throw_type_error(env, NULL, "readlink target must be a Buffer without NUL bytes");
    return NULL;
  }
  char *z = malloc(len + 1);
  if (!z) { napi_throw_error(env, NULL, "out of memory"); return NULL; }
  memcpy(z, p, len);
  z[len] = 0;
  if (mark_replied(m)) fuse_reply_readlink(m->req, z);
  free(z);
  return NULL;
}

/* (h, fh, openBits) */
napi_value reply_open(napi_env env, napi_callback_info info) {
  REPLY_PROLOGUE(3)
  struct fuse_file_info fi;
  if (!fill_open(env, argv[1], argv[2], &fi)) return NULL;
  if (mark_replied(m)) {
    /* -ENOENT here means the open was interrupted; libfuse then never sends RELEASE for it */
    fuse_reply_open(m->req, &fi);
  }
  return NULL;
}

/* (h, buf?: Buffer|Uint8Array) */
napi_value reply_buf(napi_env env, napi_callback_info info) {
  REPLY_PROLOGUE(2)
  void *p = NULL;
  size_t len = 0;
  napi_valuetype t;
  napi_typeof(env, argv[1], &t);
  if (t != napi_undefined && t != napi_null) {
    napi_typedarray_type tt;
    napi_value ab;
    size_t off;
    if (napi_get_typedarray_info(env, argv[1], &tt, &len, &p, &ab, &off) != napi_ok || tt != napi_uint8_array) {
      napi_throw_type_error(env, NULL, "reply data must be a Buffer or Uint8Array");
      return NULL;
    }
  }
  if (mark_replied(m)) fuse_reply_buf(m->req, p, len);
  return NULL;
}

/* Takes the receive buffer of a WRITE's payload back from JS once its data is written: the Buffer JS
 * got is detached (its length becomes 0, so nothing can read the memory again) and the buffer becomes
 * the session's spare. Only the Buffer the request was dispatched with qualifies; anything else, or a
 * detach that fails, leaves the payload to its finalizer as before. */
static void recycle_payload(napi_env env, ll_msg *m, napi_value buf) {
  ll_payload *p = m->payload;
  if (p == NULL || p->base == NULL || p->recycled) return;
  napi_typedarray_type type;
  size_t length, offset;
  void *data;
  napi_value ab;
  bool is_typedarray = false;
  if (napi_is_typedarray(env, buf, &is_typedarray) != napi_ok || !is_typedarray) return;
  if (napi_get_typedarray_info(env, buf, &type, &length, &data, &ab, &offset) != napi_ok) return;
  if ((char *) data < p->base || (char *) data >= p->base + m->s->rbuf.size) return;
  /* Marked first: should the detach run the Buffer's finalizer at once, it must not free base. */
  p->recycled = 1;
  if (napi_detach_arraybuffer(env, ab) != napi_ok) {
    p->recycled = 0;
    return;
  }
  if (m->s->spare == NULL && m->s->poll_open) m->s->spare = p->base;
  else free(p->base);
  p->base = NULL;
}

/* (h, count[, payload]) */
napi_value reply_write(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  if (argc < 2) { napi_throw_type_error(env, NULL, "missing arguments"); return NULL; }
  ll_msg *m = take_req(env, argv[0]); if (!m) return NULL;
  double c;
  if (!arg_double(env, argv[1], &c)) return NULL;
  if (mark_replied(m)) fuse_reply_write(m->req, (size_t) c);
  if (argc >= 3) recycle_payload(env, m, argv[2]);
  return NULL;
}

/* (h), statfs in scratch: bsize frsize blocks bfree bavail files ffree favail fsid flag namemax */
napi_value reply_statfs(napi_env env, napi_callback_info info) {
  REPLY_PROLOGUE(1)
  static const double zero[16];
  const double *d = session_live(m->s) ? m->s->scratch : zero;
  struct statvfs sv;
  memset(&sv, 0, sizeof(sv));
  sv.f_bsize = (unsigned long) d[0];
  sv.f_frsize = (unsigned long) d[1];
  sv.f_blocks = (fsblkcnt_t) d[2];
  sv.f_bfree = (fsblkcnt_t) d[3];
  sv.f_bavail = (fsblkcnt_t) d[4];
  sv.f_files = (fsfilcnt_t) d[5];
  sv.f_ffree = (fsfilcnt_t) d[6];
  sv.f_favail = (fsfilcnt_t) d[7];
  sv.f_fsid = (unsigned long) d[8];
  sv.f_flag = (unsigned long) d[9];
  sv.f_namemax = (unsigned long) d[10];
  if (mark_replied(m)) fuse_reply_statfs(m->req, &sv);
  return NULL;
}

/* (h, size) */
napi_value reply_xattr(napi_env env, napi_callback_info info) {
  REPLY_PROLOGUE(2)
  double c;
  if (!arg_double(env, argv[1], &c)) return NULL;
  if (mark_replied(m)) fuse_reply_xattr(m->req, (size_t) c);
  return NULL;
}

/* (h) -> boolean */
napi_value req_replied(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], r;
  void *p = NULL;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (napi_get_value_external(env, argv[0], &p) != napi_ok || !p) return NULL;
  napi_get_boolean(env, ((ll_msg *) p)->replied != 0, &r);
  return r;
}
