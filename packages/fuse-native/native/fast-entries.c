/* The lookup fast path: a LOOKUP of a missing name in a directory JS marked "fast" is answered here,
 * while libfuse decodes it inside on_poll, without entering JS.
 *
 * JS marks a directory when every decision about a missing name in it is trivial: the directory exists
 * only in the sandbox's writable layer (the codebase has nothing at or below its path, no frozen layer
 * lies between), every path below it is `write` under the rules in force, and the caller is the
 * sandbox's. JS passes the directory's path relative to the writable layer's root and that root's fd; C
 * opens the directory itself with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), so no symlink and no
 * `..` can lead it elsewhere, and keeps the O_PATH fd.
 *
 * A LOOKUP is answered here only when, at that moment, the name is plain ASCII without '/' and is not
 * `.` or `..` (JS refuses names that are not UTF-8, and answers those), fstatat(dirfd, name, NOFOLLOW)
 * says ENOENT, and the codebase still has no directory at the marked path (one openat2 from the
 * codebase root, no symlink followed). The answer is a negative entry the kernel does not cache (timeout
 * 0), so JS has no cached name to invalidate later. Anything else goes to JS, which answers as before.
 *
 * Revocation: every mark carries the generation it was made under. JS bumps it before a rule change
 * applies, before a layer change (checkpoint, restore) and at every invalidation of the kernel's caches
 * (commit, discard, writes behind the mount); C bumps it at the decode of a RENAME (a directory's path,
 * so the rules it falls under, may change) and again at its reply (a mark JS made while the rename was
 * under way may name the old path), except for a RENAME of a non-directory (fast-rename.c), which moves
 * no directory. JS drops a node's mark when the kernel forgets the node.
 * JS thread only, like everything touching the session. */
#include "ll.h"
#include "fast-entries.h"

#include <linux/openat2.h>
#include <sys/syscall.h>

#define FE_BUCKETS 256
/* Bound on marked directories: each holds an fd. Beyond it stale marks are swept; then new ones refused. */
#define FE_MAX_DIRS 4096
#define FE_NAME_MAX 255

struct fe_dir {
  struct fe_dir *next;
  uint64_t ino;
  int fd;          /* O_PATH of the directory in the writable layer */
  double gen;      /* FE_GEN when marked */
  uint64_t st_ino; /* the st_ino JS shows for it when C may answer its GETATTR (fast-create.c), else 0 */
  char rel[];      /* its path below the layer roots, no leading '/' */
};

struct fe_state {
  struct fe_dir *tab[FE_BUCKETS];
  size_t count;
  int lower_fd;    /* the codebase root (dup), -1: none */
  double *shared;  /* FE_* (fast-entries.h) */
  napi_ref shared_ref;
};

static uint32_t bucket_of(uint64_t ino) {
  return (uint32_t) ((ino * 0x9E3779B97F4A7C15ull) >> 56) % FE_BUCKETS;
}

static int open_beneath(int root, const char *rel, uint64_t flags) {
  struct open_how how;
  memset(&how, 0, sizeof(how));
  how.flags = flags | O_PATH | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  return (int) syscall(SYS_openat2, root, rel, &how, sizeof(how));
}

static double gen_of(struct fe_state *f) { return f->shared[FE_GEN]; }

static void free_dir(struct fe_state *f, struct fe_dir *d) {
  close(d->fd);
  free(d);
  f->count--;
}

/* Unlinks and frees the node's mark; also every stale one when `sweep` is set. */
static void drop(struct fe_state *f, uint64_t ino, int sweep) {
  double gen = gen_of(f);
  for (int b = sweep ? 0 : (int) bucket_of(ino); b < FE_BUCKETS; b++) {
    struct fe_dir **p = &f->tab[b];
    while (*p) {
      struct fe_dir *d = *p;
      if (d->ino == ino || (sweep && d->gen != gen)) { *p = d->next; free_dir(f, d); }
      else p = &d->next;
    }
    if (!sweep) break;
  }
}

/* Plain ASCII, no '/', not `.` or `..`, 1..255 bytes: the names JS would take as they are. */
static int plain_name(const char *name) {
  size_t n = 0;
  for (const unsigned char *c = (const unsigned char *) name; *c; c++, n++) {
    if (*c >= 0x80 || *c == '/' || n >= FE_NAME_MAX) return 0;
  }
  if (n == 0) return 0;
  return !(name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0)));
}

int fentry_lookup(ll_session *s, fuse_req_t req, uint64_t parent, const char *name) {
  struct fe_state *f = s->fentries;
  if (!f || f->count == 0) return 0;
  struct fe_dir *d = f->tab[bucket_of(parent)];
  while (d && d->ino != parent) d = d->next;
  if (!d || d->gen != gen_of(f) || !plain_name(name)) return 0;
  const struct fuse_ctx *c = fuse_req_ctx(req);
  /* the binding's serve(): another uid than the sandbox's own or root is refused in JS */
  if (f->shared[FE_CALLER_UID] >= 0 && c->uid != 0 && (double) c->uid != f->shared[FE_CALLER_UID]) return 0;
  struct stat st;
  if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) return 0;
  /* The codebase still lacks the directory (so the name too): anything but ENOENT is JS's to judge. */
  if (f->lower_fd < 0) return 0;
  int lo = open_beneath(f->lower_fd, d->rel, O_DIRECTORY);
  if (lo >= 0) { close(lo); return 0; }
  if (errno != ENOENT) return 0;
  struct fuse_entry_param e;
  memset(&e, 0, sizeof(e));
  fuse_reply_entry(req, &e); /* ino 0, timeouts 0: a negative entry the kernel does not keep */
  f->shared[FE_SERVED] += 1;
  return 1;
}

/* The marked directory `ino` if its mark is current and the codebase still lacks the directory (the same
 * checks as fentry_lookup's); else NULL. */
static struct fe_dir *current_dir(ll_session *s, uint64_t ino) {
  struct fe_state *f = s->fentries;
  if (!f || f->count == 0 || f->lower_fd < 0) return NULL;
  struct fe_dir *d = f->tab[bucket_of(ino)];
  while (d && d->ino != ino) d = d->next;
  if (!d || d->gen != gen_of(f)) return NULL;
  int lo = open_beneath(f->lower_fd, d->rel, O_DIRECTORY);
  if (lo >= 0) { close(lo); return NULL; }
  if (errno != ENOENT) return NULL;
  return d;
}

/* The marked directory `ino`'s fd and path below the layer roots, or -1 (current_dir). For the create
 * fast path. */
int fentry_dir(ll_session *s, uint64_t ino, const char **rel) {
  struct fe_dir *d = current_dir(s, ino);
  if (!d) return -1;
  *rel = d->rel;
  return d->fd;
}

/* The marked directory `ino`'s fd and the st_ino JS showed for it, when JS also let C answer its GETATTR
 * (the directory's own rule is `write` too, and the writable layer's filesystem counts subdirectories in
 * st_nlink), or -1. For the create fast path's GETATTR. */
int fentry_dir_attrs(ll_session *s, uint64_t ino, uint64_t *st_ino) {
  struct fe_dir *d = current_dir(s, ino);
  if (!d || d->st_ino == 0) return -1;
  *st_ino = d->st_ino;
  return d->fd;
}

/* The marks' generation now: what is read under a mark serves no longer once it moves. */
double fentry_gen(ll_session *s) {
  return s->fentries ? gen_of(s->fentries) : -1;
}

void fentry_revoke(ll_session *s) {
  if (s->fentries) s->fentries->shared[FE_GEN] += 1;
}

void fentry_free(ll_session *s) {
  struct fe_state *f = s->fentries;
  if (!f) return;
  for (int b = 0; b < FE_BUCKETS; b++) {
    while (f->tab[b]) {
      struct fe_dir *d = f->tab[b];
      f->tab[b] = d->next;
      free_dir(f, d);
    }
  }
  if (f->lower_fd >= 0) close(f->lower_fd);
  free(f);
  s->fentries = NULL;
}

void fentry_release(ll_session *s, napi_env env) {
  struct fe_state *f = s->fentries;
  if (f && f->shared_ref) { napi_delete_reference(env, f->shared_ref); f->shared_ref = NULL; }
  fentry_free(s);
}

/* ll_fentry_init(session, shared: Float64Array (FE_COUNT), codebaseRootFd) — once. */
napi_value ll_fentry_init(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  napi_typedarray_type tt;
  size_t len;
  void *data;
  uint64_t lower;
  if (s->fentries || argc < 3 || napi_get_typedarray_info(env, argv[1], &tt, &len, &data, NULL, NULL) != napi_ok ||
      tt != napi_float64_array || len < FE_COUNT || !get_u64(env, argv[2], &lower) || lower > INT32_MAX) {
    napi_throw_type_error(env, NULL, "fentryInit(shared: Float64Array, codebaseRootFd), once");
    return NULL;
  }
  struct fe_state *f = calloc(1, sizeof(*f));
  if (!f) { napi_throw_error(env, NULL, "out of memory"); return NULL; }
  f->lower_fd = fcntl((int) lower, F_DUPFD_CLOEXEC, 3);
  if (f->lower_fd < 0) { free(f); napi_throw_error(env, NULL, "fentryInit: the codebase root fd is not open"); return NULL; }
  if (napi_create_reference(env, argv[1], 1, &f->shared_ref) != napi_ok) {
    close(f->lower_fd);
    free(f);
    napi_throw_error(env, NULL, "fentryInit: no reference");
    return NULL;
  }
  f->shared = data;
  s->fentries = f;
  return NULL;
}

/* ll_fentry_mark(session, ino, upperRootFd, rel: string, stIno) -> whether the directory is marked now.
 * stIno 0: its GETATTRs stay JS's; else the st_ino C answers them with. */
napi_value ll_fentry_mark(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  struct fe_state *f = s->fentries;
  uint64_t ino, root, st_ino;
  size_t rlen;
  if (!f || argc < 5 || !get_u64(env, argv[1], &ino) || !get_u64(env, argv[2], &root) || root > INT32_MAX ||
      napi_get_value_string_utf8(env, argv[3], NULL, 0, &rlen) != napi_ok || !get_u64(env, argv[4], &st_ino)) {
    napi_throw_type_error(env, NULL, "fentryMark(ino, upperRootFd, rel, stIno) after fentryInit");
    return NULL;
  }
  drop(f, ino, 0);
  int ok = 0;
  if (f->count >= FE_MAX_DIRS) drop(f, 0, 1);
  struct fe_dir *d = f->count < FE_MAX_DIRS && rlen > 0 && rlen < 4096 ? malloc(sizeof(*d) + rlen + 1) : NULL;
  if (d) {
    napi_get_value_string_utf8(env, argv[3], d->rel, rlen + 1, &rlen);
    /* a relative path without NUL inside (the layer's own paths never hold one) */
    d->fd = strlen(d->rel) == rlen && d->rel[0] != '/' ? open_beneath((int) root, d->rel, O_DIRECTORY) : -1;
    if (d->fd >= 0) {
      d->ino = ino;
      d->gen = gen_of(f);
      d->st_ino = st_ino;
      uint32_t b = bucket_of(ino);
      d->next = f->tab[b];
      f->tab[b] = d;
      f->count++;
      ok = 1;
    } else {
      free(d);
    }
  }
  napi_value r;
  napi_get_boolean(env, ok, &r);
  return r;
}

/* ll_fentry_unmark(session, ino): the node's mark goes (the kernel forgot the node). */
napi_value ll_fentry_unmark(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  uint64_t ino;
  if (!s) return NULL;
  if (argc < 2 || !get_u64(env, argv[1], &ino)) {
    napi_throw_type_error(env, NULL, "fentryUnmark(ino)");
    return NULL;
  }
  if (s->fentries) drop(s->fentries, ino, 0);
  return NULL;
}
