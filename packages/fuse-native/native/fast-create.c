/* The create fast path: a CREATE of a new regular file in a directory the lookup fast path marked
 * (fast-entries.c: only the writable layer holds it, every path below it is `write`, the codebase still
 * lacks it) is answered here, while libfuse decodes it inside on_poll, without entering JS.
 *
 * What JS would do, in its order: the journal record of the add (`{"op":"base",...,"exists":false}`,
 * one write(2) before the file exists, the same bytes JSON.stringify makes), the file made with
 * openat(O_CREAT | O_EXCL | O_NOFOLLOW) in the directory's fd, given to the caller (fchown, then fchmod:
 * a chown clears set-id bits), its node id taken from a range JS lent, the quota charged from the write
 * fast path's grant (a new entry's least charge and one block of directory growth, more than JS checks),
 * the file registered for the write fast path at once, and the entry answered with the attributes JS
 * would give (a `write` file shows its host mode, owner and times; st_ino is the host's).
 *
 * Each created entry is reported to JS before the next request it gets (fcreate_report from queue_push
 * and at the end of each read batch): JS adopts the journal record into its state, the node into its
 * inode table, the fd into its handles, and folds the charge into the exact counts. Until then JS's
 * journal does not compact (FC_UNADOPTED). Anything unusual goes to JS: another caller, a name that is
 * not plain printable ASCII (or needs JSON escaping), set-id bits asked for, a set-gid directory, odd
 * open flags, no id or no quota left, the audit recording allowed accesses, a failed step (the file is
 * removed again; the record stays, harmless, as after a create JS refused after recording).
 * JS thread only, like everything touching the session. */
#include "ll.h"
#include "fast-entries.h"
#include "fast-create.h"
#include "fast-read.h"

#define FC_NAME_MAX 255
/* A new entry's least charge (quota.ts MIN_CHARGE) and the most its name grows the directory by. */
#define FC_CHARGE (4096 + 4096)
#define FC_ODD_FLAGS (O_APPEND | O_DIRECT | O_SYNC | O_DSYNC | O_PATH | O_TMPFILE | O_DIRECTORY | O_NOATIME)

/* The files made here, while the write fast path holds their fd: GETATTR and SETATTR of mode and times
 * are answered on it. Bounded: past FC_NODES_MAX the table starts over (those nodes go to JS). */
#define FC_NODE_BUCKETS 4096
#define FC_NODES_MAX 65536
struct fc_node {
  struct fc_node *next;
  uint64_t ino;
  uint64_t st_ino;     /* what the kernel was shown */
  uint32_t rgen;       /* the read fast path's generation when it was made (fast_read_gen) */
};

struct fc_state {
  struct fc_node *nodes[FC_NODE_BUCKETS];
  size_t nnodes;
  double *shared;      /* FC_* */
  napi_ref shared_ref, report_ref;
  double *rows;        /* FCR_WIDTH doubles per created entry since the last report */
  size_t nrows, cap;
  char *names;         /* their names, each followed by '/' */
  size_t nlen, ncap;
  int reporting;
};

/* Printable ASCII without '/', '"' or '\\' (JSON.stringify copies it as it is), not `.` or `..`. */
static int plain_name(const char *name, size_t *len) {
  size_t n = 0;
  for (const unsigned char *c = (const unsigned char *) name; *c; c++, n++) {
    if (*c < 0x20 || *c > 0x7e || *c == '/' || *c == '"' || *c == '\\' || n >= FC_NAME_MAX) return 0;
  }
  *len = n;
  if (n == 0) return 0;
  return !(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0)));
}

static int json_plain(const char *p) {
  for (const unsigned char *c = (const unsigned char *) p; *c; c++)
    if (*c < 0x20 || *c > 0x7e || *c == '"' || *c == '\\') return 0;
  return 1;
}

static int grow(void **p, size_t *cap, size_t need, size_t unit) {
  if (need <= *cap) return 1;
  size_t cap2 = *cap ? *cap * 2 : 64;
  while (cap2 < need) cap2 *= 2;
  void *q = realloc(*p, cap2 * unit);
  if (!q) return 0;
  *p = q;
  *cap = cap2;
  return 1;
}

/* Room for one more row and its name, before anything is done (a failed malloc then sends it to JS). */
static int room(struct fc_state *f, size_t namelen) {
  return grow((void **) &f->rows, &f->cap, (f->nrows + 1) * FCR_WIDTH, sizeof(double)) &&
         grow((void **) &f->names, &f->ncap, f->nlen + namelen + 1, 1);
}

static void add_row(struct fc_state *f, const double *row, const char *name, size_t namelen) {
  memcpy(f->rows + f->nrows * FCR_WIDTH, row, FCR_WIDTH * sizeof(double));
  f->nrows++;
  if (row[FCR_PARENT] == 0) return; /* a SETATTR's row: no name */
  memcpy(f->names + f->nlen, name, namelen);
  f->names[f->nlen + namelen] = '/';
  f->nlen += namelen + 1;
}

/* Appends the add's record (or, `unbase`, a removal's: delta/records.ts removeEntry of a file the codebase
 * never had); its length, or 0 when nothing was written (a partial write is cut off). */
static size_t journal_line(int jfd, const char *rel, const char *name, int unbase) {
  char line[4096 + FC_NAME_MAX + 96];
  int len = unbase
    ? snprintf(line, sizeof(line), "{\"op\":\"unbase\",\"path\":\"%s/%s\"}\n", rel, name)
    : snprintf(line, sizeof(line), "{\"op\":\"base\",\"path\":\"%s/%s\",\"base\":{\"exists\":false}}\n", rel, name);
  if (len <= 0 || (size_t) len >= sizeof(line)) return 0;
  struct stat st;
  if (fstat(jfd, &st) != 0) return 0;
  ssize_t n = write(jfd, line, (size_t) len);
  if (n == len) return (size_t) len;
  if (n > 0 && ftruncate(jfd, st.st_size) != 0) { /* a torn line stays for replay to report */ }
  return 0;
}

static uint32_t node_bucket(uint64_t ino) {
  return (uint32_t) ((ino * 0x9E3779B97F4A7C15ull) >> 52) % FC_NODE_BUCKETS;
}

static void forget_nodes(struct fc_state *f) {
  for (int b = 0; b < FC_NODE_BUCKETS; b++) {
    while (f->nodes[b]) {
      struct fc_node *n = f->nodes[b];
      f->nodes[b] = n->next;
      free(n);
    }
  }
  f->nnodes = 0;
}

static void remember_node(struct fc_state *f, uint64_t ino, uint64_t st_ino, uint32_t rgen) {
  if (f->nnodes >= FC_NODES_MAX) forget_nodes(f);
  struct fc_node *n = malloc(sizeof(*n));
  if (!n) return; /* its GETATTR and SETATTR go to JS */
  uint32_t b = node_bucket(ino);
  n->ino = ino;
  n->st_ino = st_ino;
  n->rgen = rgen;
  n->next = f->nodes[b];
  f->nodes[b] = n;
  f->nnodes++;
}

/* The node is no longer "made here" (a RENAME moved or replaced it: its path, so its rule, may differ). */
void fcreate_forget(ll_session *s, uint64_t ino) {
  struct fc_state *f = s->fcreate;
  if (!f || f->nnodes == 0) return;
  struct fc_node **p = &f->nodes[node_bucket(ino)];
  while (*p && (*p)->ino != ino) p = &(*p)->next;
  if (!*p) return;
  struct fc_node *n = *p;
  *p = n->next;
  free(n);
  f->nnodes--;
}

/* A file made here, for a caller served here: its node, or NULL. */
static struct fc_node *own_node(ll_session *s, fuse_req_t req, uint64_t ino) {
  struct fc_state *f = s->fcreate;
  if (!f || f->nnodes == 0 || f->shared[FC_ON] != 1) return NULL;
  struct fc_node *n = f->nodes[node_bucket(ino)];
  while (n && n->ino != ino) n = n->next;
  if (!n) return NULL;
  const struct fuse_ctx *c = fuse_req_ctx(req);
  if (f->shared[FC_CALLER_UID] >= 0 && c->uid != 0 && (double) c->uid != f->shared[FC_CALLER_UID]) return NULL;
  return n;
}

/* A file made here whose fd the write fast path still serves on current decisions (no rule change, no
 * rename, link or unlink since, no SETATTR JS served, fd not closed): its fd and shown st_ino, or -1. */
static int node_fd(ll_session *s, fuse_req_t req, uint64_t ino, uint64_t *st_ino) {
  struct fc_node *n = own_node(s, req, ino);
  if (!n) return -1;
  *st_ino = n->st_ino;
  return fast_fd_of(s, ino);
}

/* node_fd, or else the fd its READs are served from, if the read fast path's generation has not moved
 * since the file was made here: no rule change, rename, link, discard or commit since, and no unlink of
 * it (which drops its registration) nor rename of it (which forgets the node here: fast-rename.c), so its rule is still the `write` of the marked directory it was
 * made in, its path the same, and what JS would answer for it is the host file's as it is (a closed
 * file `cp -a` or `git` stats again after reading it). */
static int own_file_fd(ll_session *s, fuse_req_t req, uint64_t ino, uint64_t *st_ino) {
  struct fc_node *n = own_node(s, req, ino);
  if (!n) return -1;
  *st_ino = n->st_ino;
  int fd = fast_fd_of(s, ino);
  return fd >= 0 ? fd : fast_read_fd_since(s, ino, n->rgen);
}

static void answer_attr(fuse_req_t req, struct stat *st, uint64_t st_ino, double ttl) {
  st->st_ino = (ino_t) st_ino;
  fuse_reply_attr(req, st, ttl);
}

/* A directory's size and blocks as JS shows every directory's (attrs.ts DIR_SIZE, DIR_BLOCKS). */
#define FC_DIR_SIZE 4096
#define FC_DIR_BLOCKS 8

/* GETATTR of a marked directory JS let C answer (fentry_dir_attrs): what attr-ops.ts getattr answers for
 * it, from one fstat of the directory's own fd. Its rule is `write`, so the mode is the host's; its owner
 * is the host's (upper entries keep theirs); its link count is 2 + its visible subdirectories, which is
 * the host's st_nlink: nothing below it is hidden or in the codebase, and the layer's filesystem counts
 * subdirectories (JS checked). A link count below 2 (removed, or past ext4's count) goes to JS. */
static int dir_getattr(ll_session *s, fuse_req_t req, uint64_t ino) {
  struct fc_state *f = s->fcreate;
  if (f->shared[FC_DIR_ATTRS] != 1) return 0;
  const struct fuse_ctx *c = fuse_req_ctx(req);
  if (f->shared[FC_CALLER_UID] >= 0 && c->uid != 0 && (double) c->uid != f->shared[FC_CALLER_UID]) return 0;
  uint64_t st_ino;
  int fd = fentry_dir_attrs(s, ino, &st_ino);
  struct stat st;
  if (fd < 0 || !room(f, 0) || fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_nlink < 2) return 0;
  st.st_size = FC_DIR_SIZE;
  st.st_blocks = FC_DIR_BLOCKS;
  /* JS notes the attributes the kernel now holds fresh (dir-attr-freshness.ts) before its next request */
  double row[FCR_WIDTH] = { (double) ino, 0, -1, 0, 0, 0, 0, FCRK_DIR_ATTR };
  add_row(f, row, "", 0);
  answer_attr(req, &st, st_ino, f->shared[FC_ATTR_TTL]);
  f->shared[FC_ATTRS_SERVED] += 1;
  return 1;
}

int fcreate_getattr(ll_session *s, fuse_req_t req, uint64_t ino) {
  if (!s->fcreate) return 0;
  uint64_t st_ino;
  int fd = own_file_fd(s, req, ino, &st_ino);
  struct stat st;
  if (fd < 0) return dir_getattr(s, req, ino);
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  answer_attr(req, &st, st_ino, s->fcreate->shared[FC_ATTR_TTL]);
  s->fcreate->shared[FC_ATTRS_SERVED] += 1;
  return 1;
}

/* SETXATTR/REMOVEXATTR of a file made here, on current decisions (own_file_fd): its rule is `write`, so
 * JS would answer what it answers every writable entry, EOPNOTSUPP (attr-ops.ts xattrSet), and record
 * nothing (only refusals are audited). `cp -a` tries an ACL on every file it copies. */
int fcreate_setxattr(ll_session *s, fuse_req_t req, uint64_t ino) {
  if (!s->fcreate) return 0;
  uint64_t st_ino;
  if (own_file_fd(s, req, ino, &st_ino) < 0) return 0;
  s->fcreate->shared[FC_XATTRS_SERVED] += 1;
  fuse_reply_err(req, EOPNOTSUPP);
  return 1;
}

/* Mode (without set-id bits) and times only: what `tar -x` sets after each file. The kernel has checked
 * who may (default_permissions: the owner, or root); the rules are `write` (the directory's mark). */
int fcreate_setattr(ll_session *s, fuse_req_t req, uint64_t ino, struct stat *attr, int to_set) {
  const int allowed = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
                      FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME;
  if (to_set & ~allowed) return 0;
  if ((to_set & FUSE_SET_ATTR_MODE) && (attr->st_mode & (S_ISUID | S_ISGID))) return 0;
  struct fc_state *f = s->fcreate;
  uint64_t st_ino;
  int fd = node_fd(s, req, ino, &st_ino);
  if (fd < 0 || !room(f, 0)) return 0;
  struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, UTIME_OMIT } };
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) ts[0].tv_nsec = UTIME_NOW;
  else if (to_set & FUSE_SET_ATTR_ATIME) ts[0] = attr->st_atim;
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) ts[1].tv_nsec = UTIME_NOW;
  else if (to_set & FUSE_SET_ATTR_MTIME) ts[1] = attr->st_mtim;
  /* a step that fails leaves what is done done (JS does each again, harmlessly) and goes to JS */
  if ((to_set & FUSE_SET_ATTR_MODE) && fchmod(fd, attr->st_mode & 07777) != 0) return 0;
  if ((ts[0].tv_nsec != UTIME_OMIT || ts[1].tv_nsec != UTIME_OMIT) && futimens(fd, ts) != 0) return 0;
  struct stat st;
  if (fstat(fd, &st) != 0) return 0;
  double row[FCR_WIDTH] = { (double) ino, 0, -1, 0, 0, 0, 0, FCRK_SETATTR };
  add_row(f, row, "", 0);
  answer_attr(req, &st, st_ino, f->shared[FC_ATTR_TTL]);
  f->shared[FC_ATTRS_SERVED] += 1;
  return 1;
}

static double st_ino_shown(const struct stat *st, uint64_t ino) {
  uint64_t folded = (uint64_t) st->st_ino & 0x1fffffffffffffull; /* attrs.ts stableIno */
  return (double) (folded ? folded : ino);
}

double *fc_shared(ll_session *s) {
  return s->fcreate ? s->fcreate->shared : NULL;
}

/* Whether a namespace change may be answered here at all: served (no audit of allowed accesses), the
 * write fast path's state and the journal there, the caller the sandbox's own or root. */
int fc_serving(ll_session *s, fuse_req_t req) {
  struct fc_state *f = s->fcreate;
  if (!f || f->shared[FC_ON] != 1 || !s->fast_tab || !s->fast_state || f->shared[FC_JOURNAL_FD] < 0) return 0;
  const struct fuse_ctx *c = fuse_req_ctx(req);
  return !(f->shared[FC_CALLER_UID] >= 0 && c->uid != 0 && (double) c->uid != f->shared[FC_CALLER_UID]);
}

/* The fd of `parent` when a change of `name` in it may be answered here: a plain name, a current mark
 * (fentry_dir: the codebase still lacks the directory), a path the journal takes as it is, room for the
 * report's row, not set-gid (a create there takes the directory's group: JS's). Else -1. */
int fc_dir_for(ll_session *s, uint64_t parent, const char *name, size_t *namelen, const char **rel) {
  if (!plain_name(name, namelen)) return -1;
  int dirfd = fentry_dir(s, parent, rel);
  if (dirfd < 0 || !json_plain(*rel) || !room(s->fcreate, *namelen)) return -1;
  struct stat st;
  if (fstat(dirfd, &st) != 0 || (st.st_mode & S_ISGID)) return -1;
  return dirfd;
}

/* Appends a record for `rel`/`name` that JS adopts from the next report; its length, 0: none written. */
size_t fc_journal(ll_session *s, const char *rel, const char *name, int unbase) {
  double *sh = s->fcreate->shared;
  size_t jbytes = journal_line((int) sh[FC_JOURNAL_FD], rel, name, unbase);
  if (jbytes > 0) sh[FC_UNADOPTED] += 1;
  return jbytes;
}

void fc_add_row(ll_session *s, const double *row, const char *name, size_t namelen) {
  add_row(s->fcreate, row, name, namelen);
}

/* Room for one more row without a name (a failed malloc then sends the request to JS). */
int fc_room(ll_session *s) {
  return room(s->fcreate, 0);
}

int fcreate_create(ll_session *s, fuse_req_t req, uint64_t parent, const char *name, mode_t mode, int flags) {
  if (!fc_serving(s, req)) return 0;
  struct fc_state *f = s->fcreate;
  double *sh = f->shared;
  const struct fuse_ctx *c = fuse_req_ctx(req);
  if ((flags & FC_ODD_FLAGS) || ((mode & S_IFMT) != S_IFREG && (mode & S_IFMT) != 0)) return 0;
  if (mode & (S_ISUID | S_ISGID)) return 0;
  if (!(sh[FC_NEXT] < sh[FC_END])) return 0;
  double *ws = s->fast_state;
  int charged = !isinf(ws[FS_GRANT]);
  if (charged && ws[FS_GRANT] < FC_CHARGE) return 0;
  size_t namelen;
  const char *rel;
  int dirfd = fc_dir_for(s, parent, name, &namelen, &rel);
  if (dirfd < 0) return 0;
  struct stat st;
  /* the name must not exist (JS: EEXIST) */
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) return 0;
  size_t jbytes = fc_journal(s, rel, name, 0);
  if (jbytes == 0) return 0;
  double row[FCR_WIDTH] = { 0, (double) parent, -1, 0, 0, 0, (double) jbytes, FCRK_CREATE };
  int open_flags = (flags & ~O_ACCMODE) | O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = openat(dirfd, name, open_flags, 0600);
  int ok = fd >= 0 && fchown(fd, c->uid, c->gid) == 0 && fchmod(fd, mode & 07777) == 0 && fstat(fd, &st) == 0;
  uint64_t ino = (uint64_t) sh[FC_NEXT];
  int direct = sh[FC_DIRECT] == 1 && (flags & O_ACCMODE) == O_WRONLY;
  if (ok) ok = fast_register_fd(s, ino, fd, direct);
  if (!ok) {
    /* JS does the create again (and answers its error); the record alone is adopted */
    if (fd >= 0) { unlinkat(dirfd, name, 0); close(fd); }
    add_row(f, row, name, namelen);
    return 0;
  }
  sh[FC_NEXT] += 1;
  if (charged) {
    ws[FS_GRANT] -= FC_CHARGE;
    ws[FS_PENDING] += FC_CHARGE;
  }
  row[FCR_INO] = (double) ino;
  row[FCR_FD] = fd;
  row[FCR_STINO] = st_ino_shown(&st, ino);
  row[FCR_CHARGE] = charged ? FC_CHARGE : 0;
  row[FCR_DIRECT] = direct;
  add_row(f, row, name, namelen);
  remember_node(f, ino, (uint64_t) row[FCR_STINO], fast_read_gen(s));
  sh[FC_SERVED] += 1;

  struct fuse_entry_param e;
  memset(&e, 0, sizeof(e));
  e.ino = ino;
  e.entry_timeout = e.attr_timeout = sh[FC_TTL];
  e.attr = st;
  e.attr.st_ino = (ino_t) row[FCR_STINO];
  struct fuse_file_info fi;
  memset(&fi, 0, sizeof(fi));
  fi.direct_io = direct;
  fi.keep_cache = 1;
  fuse_reply_create(req, &e, &fi);
  return 1;
}

int fcreate_pending(ll_session *s) {
  return s->fcreate && s->fcreate->nrows > 0;
}

/* Queues the report of the entries created since the last one (JS thread, from queue_push and on_poll). */
void fcreate_report(ll_session *s) {
  struct fc_state *f = s->fcreate;
  if (!f || f->nrows == 0 || f->reporting) return;
  ll_msg *m = msg_new(NULL, EV_FAST_CREATES, 0);
  if (!m) return;
  m->s = s;
  m->data = (char *) f->rows;
  m->datalen = f->nrows * FCR_WIDTH * sizeof(double);
  m->data_base = f->names;
  m->size = f->nlen;
  f->rows = NULL;
  f->names = NULL;
  f->nrows = f->cap = f->nlen = f->ncap = 0;
  f->reporting = 1; /* queue_push must not report again from inside this push */
  queue_push(s, m);
  f->reporting = 0;
}

/* EV_FAST_CREATES reaches JS: onCreates(rows: Float64Array, names: string of `name/` each). */
void fcreate_report_event(ll_session *s, napi_env env, ll_msg *m) {
  struct fc_state *f = s->fcreate;
  napi_value cb, ab, argv[2], global, r;
  void *p;
  if (f && f->report_ref && napi_get_reference_value(env, f->report_ref, &cb) == napi_ok &&
      napi_create_arraybuffer(env, m->datalen, &p, &ab) == napi_ok) {
    memcpy(p, m->data, m->datalen);
    napi_create_typedarray(env, napi_float64_array, m->datalen / sizeof(double), ab, 0, &argv[0]);
    napi_create_string_latin1(env, m->data_base, m->size, &argv[1]);
    napi_get_global(env, &global);
    if (napi_call_function(env, global, cb, 2, argv, &r) != napi_ok) {
      napi_value err;
      napi_get_and_clear_last_exception(env, &err);
      napi_fatal_exception(env, err);
    }
  }
  free(m->data);
  free(m->data_base);
  m->data = m->data_base = NULL;
}

void fcreate_release(ll_session *s, napi_env env) {
  struct fc_state *f = s->fcreate;
  if (!f) return;
  if (env && f->shared_ref) napi_delete_reference(env, f->shared_ref);
  if (env && f->report_ref) napi_delete_reference(env, f->report_ref);
  free(f->rows);
  free(f->names);
  forget_nodes(f);
  free(f);
  s->fcreate = NULL;
}

/* ll_fcreate_init(session, shared: Float64Array (FC_COUNT), onCreates) — once, after fastInit and
 * fentryInit. */
napi_value ll_fcreate_init(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  napi_typedarray_type tt;
  size_t len;
  void *data;
  napi_valuetype fn;
  if (s->fcreate || argc < 3 || napi_get_typedarray_info(env, argv[1], &tt, &len, &data, NULL, NULL) != napi_ok ||
      tt != napi_float64_array || len < FC_COUNT || napi_typeof(env, argv[2], &fn) != napi_ok || fn != napi_function) {
    napi_throw_type_error(env, NULL, "fcreateInit(shared: Float64Array, onCreates: function), once");
    return NULL;
  }
  struct fc_state *f = calloc(1, sizeof(*f));
  if (!f) { napi_throw_error(env, NULL, "out of memory"); return NULL; }
  if (napi_create_reference(env, argv[1], 1, &f->shared_ref) != napi_ok ||
      napi_create_reference(env, argv[2], 1, &f->report_ref) != napi_ok) {
    free(f);
    napi_throw_error(env, NULL, "fcreateInit: no reference");
    return NULL;
  }
  f->shared = data;
  s->fcreate = f;
  return NULL;
}
