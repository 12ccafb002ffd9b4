/* The listing fast path: a READDIRPLUS (or READDIR) of a directory the lookup fast path marked, where a
 * GETATTR of it is answered in C too (fentry_dir_attrs: only the writable layer holds it, it and every
 * path below it are `write`, the codebase still lacks it), is answered here without entering JS.
 *
 * What dir-listing.ts would list there: `.` (the directory's shown st_ino), `..` (node 1), then the
 * upper directory's entries in strcmp order (libuv's scandir sorts so), none hidden (every path below is
 * `write`), no codebase entry and no whiteout to merge (the codebase lacks the directory: checked at
 * each request). Entry i carries offset i + 1, as listing.ts numbers them, so either side can continue a
 * listing the other began. d_ino is the host st_ino folded as attrs.ts stableIno folds it, which is what
 * the worker shows for every node it knows (it shows a hash of the path for a name nobody looked up yet:
 * it has no st_ino without a stat).
 *
 * Every entry is plain (node id 0): the kernel reads that as "no entry given" and leaves its own dentry
 * and attributes as they are (fuse_direntplus_link), so no lookup is counted and no FORGET follows; a
 * name the kernel does not hold is looked up when used, by the worker, under the rules in force.
 *
 * A listing from offset 0 is read afresh (one getdents pass) and kept, so the kernel's next requests for
 * the rest continue the same snapshot; a kept one serves only while the mark is current (a rule change,
 * a rename, a layer change or an invalidation moves the marks' generation). A listing from offset 0 that
 * goes to JS drops the kept one, so a later part never mixes snapshots. Each listing from offset 0 is
 * reported in the create fast path's stream (FCRK_LISTING): JS drops its own snapshot of the directory
 * and notes what a listing there notes (listing-replay, read-ahead predictor, the directory's atime).
 * Anything unusual goes to JS: a name that is not plain printable ASCII, an entry of unknown type, more
 * than FL_MAX_ENTRIES, the audit recording allowed accesses, the entry warm-up's walker (its listings are
 * what make the kernel hold entries), or JS switching it off (FC_LISTINGS, while walkers read what they
 * list: the worker's listings start the read-ahead).
 * JS thread only, like everything touching the session. */
#include "ll.h"
#include "fast-entries.h"
#include "fast-create.h"
#include "fast-listing.h"

#include <sys/syscall.h>

#define FL_SLOTS 8
#define FL_MAX_ENTRIES 16384
#define FL_NAME_MAX 255

struct fl_dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

/* One kept listing: its entries after `.` and `..`, sorted. */
struct fl_snap {
  uint64_t ino;
  double gen;          /* FE_GEN when read */
  uint64_t self_ino;   /* `.`'s d_ino */
  size_t count;
  char **names;        /* into `blob` */
  uint64_t *inos;
  unsigned char *types; /* S_IFMT >> 12 */
  char *blob;
  uint64_t used;       /* LRU stamp */
};

struct fl_state {
  struct fl_snap slots[FL_SLOTS];
  uint64_t clock;
};

static void clear_snap(struct fl_snap *p) {
  free(p->names);
  free(p->inos);
  free(p->types);
  free(p->blob);
  memset(p, 0, sizeof(*p));
}

void flist_free(ll_session *s) {
  if (!s->flist) return;
  for (int i = 0; i < FL_SLOTS; i++) clear_snap(&s->flist->slots[i]);
  free(s->flist);
  s->flist = NULL;
}

static struct fl_snap *find_snap(struct fl_state *f, uint64_t ino) {
  for (int i = 0; i < FL_SLOTS; i++)
    if (f->slots[i].names && f->slots[i].ino == ino) return &f->slots[i];
  return NULL;
}

static int plain_name(const char *name, size_t *len) {
  size_t n = 0;
  for (const unsigned char *c = (const unsigned char *) name; *c; c++, n++)
    if (*c < 0x20 || *c > 0x7e || n >= FL_NAME_MAX) return 0;
  *len = n;
  return n > 0;
}

/* dir-listing.ts typeBits of host-dir.ts direntType: file, directory, symlink, fifo; anything else 0. */
static int type_of(int dirfd, const struct fl_dirent64 *d) {
  unsigned char t = d->d_type;
  if (t == DT_UNKNOWN) {
    struct stat st;
    if (fstatat(dirfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) return -1;
    t = (unsigned char) IFTODT(st.st_mode);
  }
  switch (t) {
    case DT_REG: return S_IFREG >> 12;
    case DT_DIR: return S_IFDIR >> 12;
    case DT_LNK: return S_IFLNK >> 12;
    case DT_FIFO: return S_IFIFO >> 12;
    default: return 0;
  }
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Reads directory `pathfd` (O_PATH) into `p`: 1, or 0 when JS must list it. */
static int read_snap(int pathfd, struct fl_snap *p) {
  int fd = openat(pathfd, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t cap = 0, blen = 0, bcap = 0;
  char buf[8192];
  long n;
  int ok = 1;
  struct { size_t at; uint64_t ino; unsigned char type; } *ents = NULL;
  while (ok && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
    for (long at = 0; ok && at < n;) {
      struct fl_dirent64 *d = (struct fl_dirent64 *) (buf + at);
      at += d->d_reclen;
      const char *nm = d->d_name;
      if (nm[0] == '.' && (nm[1] == 0 || (nm[1] == '.' && nm[2] == 0))) continue;
      size_t len;
      uint64_t folded = d->d_ino & 0x1fffffffffffffull;
      int type = type_of(fd, d);
      if (!plain_name(nm, &len) || folded == 0 || type < 0 || p->count >= FL_MAX_ENTRIES) { ok = 0; break; }
      if (p->count == cap) {
        cap = cap ? cap * 2 : 64;
        void *q = realloc(ents, cap * sizeof(*ents));
        if (!q) { ok = 0; break; }
        ents = q;
      }
      if (blen + len + 1 > bcap) {
        bcap = bcap ? bcap * 2 : 4096;
        while (bcap < blen + len + 1) bcap *= 2;
        char *q = realloc(p->blob, bcap);
        if (!q) { ok = 0; break; }
        p->blob = q;
      }
      memcpy(p->blob + blen, nm, len + 1);
      ents[p->count].at = blen;
      ents[p->count].ino = folded;
      ents[p->count].type = (unsigned char) type;
      blen += len + 1;
      p->count++;
    }
  }
  if (n < 0) ok = 0;
  close(fd);
  if (ok) {
    p->names = malloc((p->count + 1) * sizeof(char *));
    p->inos = malloc((p->count + 1) * sizeof(uint64_t));
    p->types = malloc(p->count + 1);
    ok = p->names && p->inos && p->types;
  }
  if (ok) {
    for (size_t i = 0; i < p->count; i++) p->names[i] = p->blob + ents[i].at;
    qsort(p->names, p->count, sizeof(char *), by_name);
    /* the columns follow the sorted names: each name's record is found by its place in the blob */
    for (size_t i = 0; i < p->count; i++) {
      size_t at = (size_t) (p->names[i] - p->blob), lo = 0, hi = p->count;
      while (hi - lo > 1) { size_t mid = (lo + hi) / 2; if (ents[mid].at <= at) lo = mid; else hi = mid; }
      p->inos[i] = ents[lo].ino;
      p->types[i] = ents[lo].type;
    }
  }
  free(ents);
  if (!ok) clear_snap(p);
  return ok;
}

/* A fresh snapshot of `ino` in the least recently used slot (replacing any kept one of it), or NULL. */
static struct fl_snap *snapshot(struct fl_state *f, uint64_t ino, int pathfd, uint64_t self_ino, double gen) {
  struct fl_snap *p = find_snap(f, ino);
  if (!p) {
    p = &f->slots[0];
    for (int i = 1; i < FL_SLOTS; i++)
      if (f->slots[i].used < p->used) p = &f->slots[i];
  }
  clear_snap(p);
  if (!read_snap(pathfd, p)) return NULL;
  p->ino = ino;
  p->gen = gen;
  p->self_ino = self_ino;
  return p;
}

/* Entry i of the listing as JS numbers it: 0 `.`, 1 `..`, then the snapshot's. */
static const char *entry_at(const struct fl_snap *p, size_t i, uint64_t *d_ino, mode_t *mode) {
  if (i < 2) {
    *d_ino = i == 0 ? p->self_ino : FUSE_ROOT_ID;
    *mode = S_IFDIR;
    return i == 0 ? "." : "..";
  }
  *d_ino = p->inos[i - 2];
  *mode = (mode_t) p->types[i - 2] << 12;
  return p->names[i - 2];
}

static void reply_from(fuse_req_t req, const struct fl_snap *p, size_t size, uint64_t off, int plus) {
  char *buf = malloc(size ? size : 1);
  if (!buf) { fuse_reply_err(req, ENOMEM); return; }
  size_t used = 0;
  for (size_t i = (size_t) off; i < p->count + 2; i++) {
    uint64_t d_ino;
    mode_t mode;
    const char *name = entry_at(p, i, &d_ino, &mode);
    size_t n;
    if (plus) {
      struct fuse_entry_param e;
      memset(&e, 0, sizeof(e)); /* node id 0: a plain entry */
      e.attr.st_ino = (ino_t) d_ino;
      e.attr.st_mode = mode;
      n = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, (off_t) (i + 1));
    } else {
      struct stat st;
      memset(&st, 0, sizeof(st));
      st.st_ino = (ino_t) d_ino;
      st.st_mode = mode;
      n = fuse_add_direntry(req, buf + used, size - used, name, &st, (off_t) (i + 1));
    }
    if (n > size - used) break;
    used += n;
  }
  fuse_reply_buf(req, buf, used);
  free(buf);
}

int flist_readdir(ll_session *s, fuse_req_t req, uint64_t ino, size_t size, uint64_t off, int plus) {
  double *sh = fc_shared(s);
  if (!sh || !s->fentries) return 0;
  if (!s->flist && !(s->flist = calloc(1, sizeof(*s->flist)))) return 0;
  struct fl_state *f = s->flist;
  struct fl_snap *kept = find_snap(f, ino);
  /* a listing from 0 that JS makes is the snapshot from now on: a kept one must not continue it */
  if (off == 0 && kept) { clear_snap(kept); kept = NULL; }
  const struct fuse_ctx *c = fuse_req_ctx(req);
  if (sh[FC_LISTINGS] != 1 || !fc_serving(s, req) || (c->uid == 0 && (double) c->pid == sh[FC_SKIP_PID]) ||
      !fc_room(s))
    return 0;
  uint64_t self_ino;
  int pathfd = fentry_dir_attrs(s, ino, &self_ino);
  if (pathfd < 0) return 0;
  double gen = fentry_gen(s);
  if (off > 0) {
    /* a later part: only of the snapshot made under the marks in force */
    if (!kept || kept->gen != gen) return 0;
    kept->used = ++f->clock;
    reply_from(req, kept, size, off, plus);
    sh[FC_LISTINGS_SERVED] += 1;
    return 1;
  }
  struct fl_snap *p = snapshot(f, ino, pathfd, self_ino, gen);
  if (!p) return 0;
  p->used = ++f->clock;
  int regular = 0;
  for (size_t i = 0; i < p->count && !regular; i++) regular = p->types[i] == (S_IFREG >> 12);
  /* JS drops its own snapshot and notes the listing before its next request */
  double row[FCR_WIDTH] = { (double) ino, 0, regular, 0, 0, 0, 0, FCRK_LISTING };
  fc_add_row(s, row, "", 0);
  reply_from(req, p, size, 0, plus);
  sh[FC_LISTINGS_SERVED] += 1;
  return 1;
}
