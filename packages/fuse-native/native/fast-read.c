/* The read fast path: READs of a node whose decision JS already made are answered here, while libfuse
 * decodes them inside on_poll (a pread into one buffer and the reply), without entering JS.
 *
 * JS registers a node's host fd in the same synchronous step as its permission check, after serving a
 * READ or a WRITE of the node (writing allowed includes reading; ll_fast_read_register). A registration
 * ends where the node's decision could change: a rule change (ll_fast_invalidate) and a RENAME or LINK (a
 * path, so the rule it falls under, may change), at their decode and their reply, end every one (the
 * generation), except that a RENAME of a non-directory ends only its nodes' (fast-rename.c); JS drops a node's before it closes the node's fd (the number must never name another
 * file) and when an UNLINK removed one of its names (another name, under another rule, may be its path
 * now). RMDIR leaves them (it removes an empty directory: no other node's path changes); a SETATTR
 * changes neither the node's path nor the file its fd names (a copy-up gives the node a new fd, and JS
 * drops the old one before it closes it).
 *
 * Only what is in the host's page cache is read here (preadv2 with RWF_NOWAIT): a READ that would wait
 * for the disk goes to JS, which reads big ones in the thread pool so that the kernel's parallel
 * read-ahead requests overlap. Another caller than the sandbox's uid or root goes to JS (which refuses
 * it). The nodes read here are reported to JS before the next request it gets, and at the end of each
 * read batch: JS keeps the bookkeeping a READ it serves makes (stale atime, listings, read-ahead).
 * JS thread only. */
#include "ll.h"
#include <sys/uio.h>

/* The worker keeps up to 4096 fds open (fs/handles.ts): chains of ~4 at that size. */
#define READ_BUCKETS_LOG2 10
#define READ_BUCKETS (1 << READ_BUCKETS_LOG2)
/* Without RWF_NOWAIT (a host filesystem refusing it) only reads up to this size are served here, like
 * JS's synchronous reads (fs/data-ops.ts SYNC_READ_MAX). */
#define READ_SYNC_MAX (32 * 1024)

struct read_ent {
  struct read_ent *next;
  uint64_t ino;
  int fd;
  uint32_t gen; /* fr->gen when registered: an older one is not served */
};

struct fast_read {
  struct read_ent *tab[READ_BUCKETS];
  uint32_t gen;       /* bumped when every registration must be made again */
  double caller_uid;  /* besides root, the only uid served; -1: any */
  int nowait_off;     /* the host refused RWF_NOWAIT once */
  char *buf;
  size_t cap;
  double *noted;      /* pairs (node, 1 if a READ at offset 0 was served) since the last report */
  size_t nnoted, noted_cap;
  uint64_t reads;     /* READs served since the last report */
  int reporting;
  napi_ref report_ref;
};

static uint32_t bucket_of(uint64_t ino) {
  return (uint32_t) ((ino * 0x9E3779B97F4A7C15ull) >> (64 - READ_BUCKETS_LOG2));
}

static struct read_ent **slot(struct fast_read *fr, uint64_t ino) {
  struct read_ent **p = &fr->tab[bucket_of(ino)];
  while (*p && (*p)->ino != ino) p = &(*p)->next;
  return p;
}

/* The fd a READ of `ino` may be served from on the current decisions, or -1. */
static int fd_of(struct fast_read *fr, uint64_t ino) {
  struct read_ent *e = *slot(fr, ino);
  return e && e->gen == fr->gen ? e->fd : -1;
}

void fast_read_invalidate(ll_session *s) {
  if (s->fast_read) s->fast_read->gen++;
}

uint32_t fast_read_gen(ll_session *s) {
  return s->fast_read ? s->fast_read->gen : 0;
}

int fast_read_fd_since(ll_session *s, uint64_t ino, uint32_t gen) {
  struct fast_read *fr = s->fast_read;
  return fr && fr->gen == gen ? fd_of(fr, ino) : -1;
}

/* The node's registration ends (a RENAME moved or replaced it: fast-rename.c); its fd stays JS's. */
void fast_read_forget(ll_session *s, uint64_t ino) {
  struct fast_read *fr = s->fast_read;
  if (!fr) return;
  struct read_ent **p = slot(fr, ino);
  if (*p) { struct read_ent *e = *p; *p = e->next; free(e); }
}

static void note(struct fast_read *fr, uint64_t ino, int first) {
  fr->reads++;
  if (fr->nnoted > 0 && fr->noted[fr->nnoted - 2] == (double) ino) {
    if (first) fr->noted[fr->nnoted - 1] = 1;
    return;
  }
  if (fr->nnoted + 2 > fr->noted_cap) {
    size_t cap = fr->noted_cap ? fr->noted_cap * 2 : 128;
    double *grown = realloc(fr->noted, cap * sizeof(double));
    if (!grown) return; /* unreported: JS's cache bookkeeping errs toward "fresh" once, as in fast.c */
    fr->noted = grown;
    fr->noted_cap = cap;
  }
  fr->noted[fr->nnoted++] = (double) ino;
  fr->noted[fr->nnoted++] = first ? 1 : 0;
}

int fast_read(ll_session *s, fuse_req_t req, uint64_t ino, size_t size, off_t off) {
  struct fast_read *fr = s->fast_read;
  if (!fr || off < 0 || size == 0) return 0;
  const struct fuse_ctx *c = fuse_req_ctx(req);
  /* the binding's serve(): another uid than the sandbox's own or root is refused in JS */
  if (fr->caller_uid >= 0 && c->uid != 0 && (double) c->uid != fr->caller_uid) return 0;
  int fd = fd_of(fr, ino);
  if (fd < 0) return 0;
  if (fr->nowait_off && size > READ_SYNC_MAX) return 0;
  if (size > fr->cap) {
    char *grown = realloc(fr->buf, size);
    if (!grown) return 0;
    fr->buf = grown;
    fr->cap = size;
  }
  struct iovec iov = { fr->buf, size };
  ssize_t n = preadv2(fd, &iov, 1, off, fr->nowait_off ? 0 : RWF_NOWAIT);
  if (n < 0 && errno == EOPNOTSUPP && !fr->nowait_off) {
    fr->nowait_off = 1;
    if (size > READ_SYNC_MAX) return 0;
    n = pread(fd, fr->buf, size, off);
  }
  if (n < 0) return 0; /* EAGAIN (not cached) or an error: JS reads and answers as it always has */
  if ((size_t) n < size) {
    /* short: the end of the file, or only part of the range cached (then JS reads it all) */
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (uint64_t) off + (uint64_t) n < (uint64_t) sb.st_size) return 0;
  }
  note(fr, ino, off == 0);
  fuse_reply_buf(req, fr->buf, (size_t) n);
  return 1;
}

int fast_read_pending(ll_session *s) {
  return s->fast_read != NULL && s->fast_read->reads > 0;
}

/* Queues the report of the nodes read since the last one (JS thread, from queue_push and on_poll). */
void fast_read_report(ll_session *s) {
  struct fast_read *fr = s->fast_read;
  if (!fr || fr->reads == 0 || fr->reporting) return;
  ll_msg *m = msg_new(NULL, EV_FAST_READS, 0);
  if (!m) return;
  m->s = s;
  m->data = (char *) fr->noted;
  m->datalen = fr->nnoted * sizeof(double);
  m->size = fr->reads;
  fr->noted = NULL;
  fr->nnoted = fr->noted_cap = 0;
  fr->reads = 0;
  fr->reporting = 1; /* queue_push must not report again from inside this push */
  queue_push(s, m);
  fr->reporting = 0;
}

/* EV_FAST_READS reaches JS: onReads(pairs: Float64Array (node, first), reads: number). */
void fast_read_report_event(ll_session *s, napi_env env, ll_msg *m) {
  report_f64_event(env, s->fast_read ? s->fast_read->report_ref : NULL, m);
}

/* Ends the fast path of a session (env: also its reference to JS; NULL at the last unref). */
void fast_read_free(ll_session *s, napi_env env) {
  struct fast_read *fr = s->fast_read;
  if (!fr) return;
  s->fast_read = NULL;
  for (int i = 0; i < READ_BUCKETS; i++) {
    while (fr->tab[i]) {
      struct read_ent *e = fr->tab[i];
      fr->tab[i] = e->next;
      free(e);
    }
  }
  if (env && fr->report_ref) napi_delete_reference(env, fr->report_ref);
  free(fr->buf);
  free(fr->noted);
  free(fr);
}

static struct fast_read *session_arg(napi_env env, napi_callback_info info, size_t want, napi_value *argv, size_t *argc) {
  *argc = want;
  if (napi_get_cb_info(env, info, argc, argv, NULL, NULL) != napi_ok || *argc < 1) return NULL;
  ll_session *s = get_session(env, argv[0]);
  return s ? s->fast_read : NULL;
}

/* ll_fast_read_init(session, callerUid (-1: any), onReads) — once. */
napi_value ll_fast_read_init(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  double uid;
  napi_valuetype fn;
  if (s->fast_read || argc < 3 || napi_get_value_double(env, argv[1], &uid) != napi_ok ||
      napi_typeof(env, argv[2], &fn) != napi_ok || fn != napi_function) {
    napi_throw_type_error(env, NULL, "fastReadInit(callerUid: number, onReads: function), once");
    return NULL;
  }
  struct fast_read *fr = calloc(1, sizeof(*fr));
  if (!fr) { napi_throw_error(env, NULL, "out of memory"); return NULL; }
  fr->caller_uid = uid;
  if (napi_create_reference(env, argv[2], 1, &fr->report_ref) != napi_ok) {
    free(fr);
    napi_throw_error(env, NULL, "napi_create_reference failed");
    return NULL;
  }
  s->fast_read = fr;
  return NULL;
}

/* ll_fast_read_register(session, ino, fd) -> whether registered (a regular file). */
napi_value ll_fast_read_register(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  size_t argc;
  struct fast_read *fr = session_arg(env, info, 3, argv, &argc);
  uint64_t ino, fd;
  if (!fr || argc < 3 || !get_u64(env, argv[1], &ino) || !get_u64(env, argv[2], &fd) || fd > INT32_MAX) {
    napi_throw_type_error(env, NULL, "fastReadRegister(ino, fd) after fastReadInit");
    return NULL;
  }
  struct stat sb;
  struct read_ent **p = slot(fr, ino);
  int ok = fstat((int) fd, &sb) == 0 && S_ISREG(sb.st_mode);
  if (!ok) {
    if (*p) { struct read_ent *e = *p; *p = e->next; free(e); }
  } else {
    if (!*p && (*p = calloc(1, sizeof(struct read_ent))) == NULL) ok = 0;
    else { (*p)->ino = ino; (*p)->fd = (int) fd; (*p)->gen = fr->gen; }
  }
  napi_value r;
  napi_get_boolean(env, ok, &r);
  return r;
}

/* ll_fast_read_invalidate(session): no registration made before this is served again. */
napi_value ll_fast_read_invalidate(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  size_t argc;
  struct fast_read *fr = session_arg(env, info, 1, argv, &argc);
  if (fr) fr->gen++;
  return NULL;
}

/* ll_fast_read_drop(session, ino) -> whether it was registered. */
napi_value ll_fast_read_drop(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  size_t argc;
  struct fast_read *fr = session_arg(env, info, 2, argv, &argc);
  uint64_t ino;
  if (argc < 2 || !get_u64(env, argv[1], &ino)) {
    napi_throw_type_error(env, NULL, "fastReadDrop(ino)");
    return NULL;
  }
  int had = 0;
  if (fr) {
    struct read_ent **p = slot(fr, ino);
    if (*p) { struct read_ent *e = *p; *p = e->next; free(e); had = 1; }
  }
  napi_value r;
  napi_get_boolean(env, had, &r);
  return r;
}
