/* The write fast path: WRITEs on a file whose decision JS already made are answered here, while libfuse
 * decodes them inside on_poll, without entering JS (no record, no napi values, no promise).
 *
 * JS registers a node when it has served a write to it (ll_fast_register: the node's host fd, whether
 * set-id bits are its to clear); C keeps the file's size, block size and density from one fstat then and
 * keeps them itself from the offsets it writes. Quota: JS grants a byte budget in the shared state array
 * (state[FS_GRANT]); each write is charged the most it can add to the file's blocks (quota.ts growthBound,
 * the same arithmetic) and goes back to JS when that does not fit. The charges wait in state[FS_PENDING]
 * and per node until JS folds them into the quota with an fstat of its own (ll_fast_fold, ll_fast_drop).
 * Anything unusual (a caller JS would refuse, set-id bits to clear, an offset past 2^63, a failed write)
 * goes to JS too, which serves it as before and registers the node again.
 *
 * What can change a decision is seen here too: SETATTR and FALLOCATE of a node drop its registration
 * (size, mode), RENAME/LINK/UNLINK/RMDIR drop every one (a path, so the rule it falls under, may have
 * changed), each at decode and again at its reply, except that a RENAME of a non-directory drops only the
 * moved and the replaced node's (fast-rename.c); JS drops them at rule changes and whenever it closes
 * the fd (ll_fast_drop before the close: the number must never name another file).
 *
 * Nodes written here are reported to JS before the next request it gets (and at the end of each read
 * batch): JS keeps its own bookkeeping of the kernel's caches (stale attributes, remembered listings).
 * JS thread only, like everything touching the session. */
#include "ll.h"

#define FAST_BUCKETS 256
#define FAST_BLOCK 4096

struct fast_ent {
  struct fast_ent *next;
  uint64_t ino;
  int fd;
  int direct;        /* the kernel leaves set-id bits to us on this file's writes (direct I/O) */
  uint32_t gen;      /* s->fast_gen when registered: an older one is not served */
  int live;          /* 0 once a SETATTR/FALLOCATE of the node was seen */
  int dirty;         /* written since the last report to JS */
  uint32_t mode;
  uint64_t size;
  uint64_t blksize;
  int dense;         /* blocks cover the size: a write inside it adds nothing */
  uint64_t charged;  /* quota bytes charged and not yet folded by JS */
};

static uint32_t bucket_of(uint64_t ino) {
  return (uint32_t) ((ino * 0x9E3779B97F4A7C15ull) >> 56) % FAST_BUCKETS;
}

static struct fast_ent *find(ll_session *s, uint64_t ino) {
  if (!s->fast_tab) return NULL;
  for (struct fast_ent *e = s->fast_tab[bucket_of(ino)]; e; e = e->next) if (e->ino == ino) return e;
  return NULL;
}

/* Unlinks the node's entry and returns it (caller frees), or NULL. */
static struct fast_ent *unlink_ent(ll_session *s, uint64_t ino) {
  if (!s->fast_tab) return NULL;
  struct fast_ent **p = &s->fast_tab[bucket_of(ino)];
  for (; *p; p = &(*p)->next) {
    if ((*p)->ino == ino) {
      struct fast_ent *e = *p;
      *p = e->next;
      return e;
    }
  }
  return NULL;
}

static uint64_t round_up(uint64_t v, uint64_t bs) { return (v + bs - 1) / bs * bs; }

/* The most a write of len bytes at off can add to the file's blocks (quota.ts growthBound). */
static uint64_t growth_bound(const struct fast_ent *e, uint64_t off, uint64_t len) {
  uint64_t bs = e->blksize;
  uint64_t start = off / bs * bs;
  uint64_t end = round_up(off + len, bs);
  if (!e->dense) return end - start;
  uint64_t size_end = round_up(e->size, bs);
  uint64_t from = start > size_end ? start : size_end;
  return from >= end ? 0 : end - from;
}

static void mark_dirty(ll_session *s, struct fast_ent *e) {
  s->fast_writes++;
  if (e->dirty) return;
  if (s->fast_ndirty == s->fast_cap) {
    size_t cap = s->fast_cap ? s->fast_cap * 2 : 64;
    double *grown = realloc(s->fast_dirty, cap * sizeof(double));
    if (!grown) return; /* the node goes unreported: JS's cache bookkeeping errs toward "fresh" once */
    s->fast_dirty = grown;
    s->fast_cap = cap;
  }
  s->fast_dirty[s->fast_ndirty++] = (double) e->ino;
  e->dirty = 1;
}

int fast_write(ll_session *s, fuse_req_t req, uint64_t ino, const char *buf, size_t size, off_t off) {
  struct fast_ent *e = find(s, ino);
  if (!e || !e->live || e->gen != s->fast_gen || off < 0 || size == 0) return 0;
  if ((uint64_t) off > (uint64_t) INT64_MAX - size) return 0;
  double *st = s->fast_state;
  const struct fuse_ctx *c = fuse_req_ctx(req);
  /* the binding's serve(): another uid than the sandbox's own or root is refused in JS */
  if (st[FS_CALLER_UID] >= 0 && c->uid != 0 && (double) c->uid != st[FS_CALLER_UID]) return 0;
  /* should_remove_suid: JS clears what a writer without CAP_FSETID loses */
  if (e->direct && c->uid != 0 && ((e->mode & S_ISUID) || ((e->mode & S_ISGID) && (e->mode & S_IXGRP)))) return 0;
  uint64_t bound = 0;
  int charged = !isinf(st[FS_GRANT]);
  if (charged) {
    bound = growth_bound(e, (uint64_t) off, size);
    if ((double) bound > st[FS_GRANT]) return 0;
  }
  ssize_t n = pwrite(e->fd, buf, size, off);
  if (n < 0) return 0; /* nothing written: JS does it again and answers the error as it always has */
  if (charged) {
    st[FS_GRANT] -= (double) bound;
    st[FS_PENDING] += (double) bound;
    e->charged += bound;
  }
  uint64_t end = (uint64_t) off + (uint64_t) n;
  if (e->dense && (uint64_t) off / e->blksize * e->blksize > round_up(e->size, e->blksize)) e->dense = 0;
  if (end > e->size) e->size = end;
  mark_dirty(s, e);
  fuse_reply_write(req, (size_t) n);
  return 1;
}

void fast_forget_ino(ll_session *s, uint64_t ino) {
  struct fast_ent *e = find(s, ino);
  if (e) e->live = 0;
}

void fast_invalidate(ll_session *s) {
  s->fast_gen++;
}

/* A request that may change a decision is answered: what it changed is in place now, and a WRITE served
 * in JS between its decode and its reply may have registered the node from the old state. */
void fast_after_reply(ll_msg *m) {
  switch (m->kind) {
    case OP_SETATTR: case OP_FALLOCATE: fast_forget_ino(m->s, m->ino); break;
    case OP_LINK: case OP_UNLINK: case OP_RMDIR: fast_invalidate(m->s); break;
    default: break;
  }
}

/* Queues the report of the nodes written since the last one (JS thread, from queue_push and on_poll). */
void fast_report(ll_session *s) {
  if (s->fast_writes == 0 || s->fast_reporting) return;
  ll_msg *m = msg_new(NULL, EV_FAST_WRITES, 0);
  if (!m) return;
  m->s = s;
  m->data = (char *) s->fast_dirty;
  m->datalen = s->fast_ndirty * sizeof(double);
  m->size = s->fast_writes;
  for (size_t i = 0; i < s->fast_ndirty; i++) {
    struct fast_ent *e = find(s, (uint64_t) s->fast_dirty[i]);
    if (e) e->dirty = 0;
  }
  s->fast_dirty = NULL;
  s->fast_ndirty = s->fast_cap = 0;
  s->fast_writes = 0;
  s->fast_reporting = 1; /* queue_push must not report again from inside this push */
  queue_push(s, m);
  s->fast_reporting = 0;
}

/* A fast path's report reaches JS: the callback behind `ref` (if still there) gets the message's data as
 * a Float64Array and its count (m->size); the data is freed either way. Shared by the write and read
 * paths, whose reports have the same shape. */
void report_f64_event(napi_env env, napi_ref ref, ll_msg *m) {
  napi_value cb, ab, ta, argv[2], global, r;
  void *p;
  if (ref && napi_get_reference_value(env, ref, &cb) == napi_ok &&
      napi_create_arraybuffer(env, m->datalen, &p, &ab) == napi_ok) {
    if (m->datalen) memcpy(p, m->data, m->datalen);
    napi_create_typedarray(env, napi_float64_array, m->datalen / sizeof(double), ab, 0, &ta);
    argv[0] = ta;
    napi_create_double(env, (double) m->size, &argv[1]);
    napi_get_global(env, &global);
    if (napi_call_function(env, global, cb, 2, argv, &r) != napi_ok) {
      napi_value err;
      napi_get_and_clear_last_exception(env, &err);
      napi_fatal_exception(env, err);
    }
  }
  free(m->data);
}

/* EV_FAST_WRITES reaches JS: onWrites(nodes: Float64Array, writes: number). */
void fast_report_event(ll_session *s, napi_env env, ll_msg *m) {
  report_f64_event(env, s->fast_report_ref, m);
}

void fast_free(ll_session *s) {
  if (s->fast_tab) {
    for (int i = 0; i < FAST_BUCKETS; i++) {
      while (s->fast_tab[i]) {
        struct fast_ent *e = s->fast_tab[i];
        s->fast_tab[i] = e->next;
        free(e);
      }
    }
    free(s->fast_tab);
    s->fast_tab = NULL;
  }
  free(s->fast_dirty);
  s->fast_dirty = NULL;
}

/* ll_fast_init(session, state: Float64Array over a SharedArrayBuffer (FS_COUNT), onWrites) — once. */
napi_value ll_fast_init(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  napi_typedarray_type tt;
  size_t len;
  void *data;
  napi_valuetype fn;
  if (s->fast_tab || argc < 3 || napi_get_typedarray_info(env, argv[1], &tt, &len, &data, NULL, NULL) != napi_ok ||
      tt != napi_float64_array || len < FS_COUNT || napi_typeof(env, argv[2], &fn) != napi_ok || fn != napi_function) {
    napi_throw_type_error(env, NULL, "fastInit(state: Float64Array, onWrites: function), once");
    return NULL;
  }
  s->fast_tab = calloc(FAST_BUCKETS, sizeof(struct fast_ent *));
  if (!s->fast_tab) { napi_throw_error(env, NULL, "out of memory"); return NULL; }
  CHECK(napi_create_reference(env, argv[1], 1, &s->fast_state_ref));
  CHECK(napi_create_reference(env, argv[2], 1, &s->fast_report_ref));
  s->fast_state = data;
  return NULL;
}

/* The charges an entry leaves behind: they are JS's to fold once it has counted the file itself. */
static double settle(ll_session *s, struct fast_ent *e) {
  double charged = (double) e->charged;
  s->fast_state[FS_PENDING] -= charged;
  e->charged = 0;
  return charged;
}

static double reregister(ll_session *s, uint64_t ino, int fd, int direct);

/* ll_fast_register(session, ino, fd, direct) -> bytes the previous entry had charged (JS has just
 * counted the file), or -1 when the fd is no regular file (nothing registered). */
napi_value ll_fast_register(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  uint64_t ino, fd;
  bool direct = false;
  if (!s->fast_tab || argc < 4 || !get_u64(env, argv[1], &ino) || !get_u64(env, argv[2], &fd) || fd > INT32_MAX ||
      napi_get_value_bool(env, argv[3], &direct) != napi_ok) {
    napi_throw_type_error(env, NULL, "fastRegister(ino, fd, direct) after fastInit");
    return NULL;
  }
  double result = reregister(s, ino, (int) fd, direct);
  napi_value r;
  napi_create_double(env, result, &r);
  return r;
}

/* Registers node `ino`'s host fd: the bytes the previous entry had charged, or -1 (nothing registered). */
static double reregister(ll_session *s, uint64_t ino, int fd, int direct) {
  double before = 0;
  struct fast_ent *e = unlink_ent(s, ino);
  if (e) before = settle(s, e);
  struct stat sb;
  double result = before;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (e == NULL && (e = calloc(1, sizeof(*e))) == NULL)) {
    free(e);
    result = -1;
  } else {
    int was_dirty = e->dirty;
    memset(e, 0, sizeof(*e));
    e->dirty = was_dirty; /* still listed in s->fast_dirty */
    e->ino = ino;
    e->fd = fd;
    e->direct = direct;
    e->gen = s->fast_gen;
    e->live = 1;
    e->mode = sb.st_mode;
    e->size = (uint64_t) sb.st_size;
    e->blksize = sb.st_blksize > 0 ? (uint64_t) sb.st_blksize : FAST_BLOCK;
    e->dense = (uint64_t) sb.st_blocks * 512 >= round_up(e->size, e->blksize);
    uint32_t b = bucket_of(ino);
    e->next = s->fast_tab[b];
    s->fast_tab[b] = e;
  }
  return result;
}

/* The fd a registered node's WRITEs are served through on the current decisions, or -1 (fast-create.c
 * answers GETATTR/SETATTR of the files it made through it). */
int fast_fd_of(ll_session *s, uint64_t ino) {
  struct fast_ent *e = find(s, ino);
  return e && e->live && e->gen == s->fast_gen ? e->fd : -1;
}

/* The create fast path (fast-create.c) registers the file it made at once: its first WRITE is C's too. */
int fast_register_fd(ll_session *s, uint64_t ino, int fd, int direct) {
  return s->fast_tab != NULL && reregister(s, ino, fd, direct) >= 0;
}

/* ll_fast_drop(session, ino) -> bytes its entry had charged (JS counts the file now), -1 if none. */
napi_value ll_fast_drop(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  uint64_t ino;
  if (argc < 2 || !get_u64(env, argv[1], &ino)) {
    napi_throw_type_error(env, NULL, "fastDrop(ino)");
    return NULL;
  }
  struct fast_ent *e = unlink_ent(s, ino);
  double charged = e ? settle(s, e) : -1;
  free(e);
  napi_value r;
  napi_create_double(env, charged, &r);
  return r;
}

/* ll_fast_invalidate(session): no registration made before this is served again. */
napi_value ll_fast_invalidate(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (s) fast_invalidate(s);
  return NULL;
}

/* ll_fast_fold(session) -> Float64Array of the nodes with charges; their charges are settled (JS counts
 * each file now, from its own fstat). */
napi_value ll_fast_fold(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  size_t n = 0;
  if (s->fast_tab)
    for (int i = 0; i < FAST_BUCKETS; i++)
      for (struct fast_ent *e = s->fast_tab[i]; e; e = e->next) n += e->charged > 0;
  napi_value ab, ta;
  void *p;
  CHECK(napi_create_arraybuffer(env, n * sizeof(double), &p, &ab));
  double *out = p;
  size_t k = 0;
  if (s->fast_tab)
    for (int i = 0; i < FAST_BUCKETS; i++)
      for (struct fast_ent *e = s->fast_tab[i]; e; e = e->next)
        if (e->charged > 0) { settle(s, e); out[k++] = (double) e->ino; }
  CHECK(napi_create_typedarray(env, napi_float64_array, n, ab, 0, &ta));
  return ta;
}
