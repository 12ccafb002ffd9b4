/* Fetch threads: store-ahead (storeAhead in the TS front) reads files and stores them into the kernel's
 * page cache off the JS thread. */
#include "ll.h"

/*
 * Fetch threads: the filesystem's read-ahead across files. A walker reads the files of a directory
 * one after another, each a READ round trip that waits for the disk; these threads read the files it is
 * about to read (openat from a directory fd the JS side holds open, fstat, pread, close) and store them
 * into the kernel's page cache (ahead_one), or only start the host's read-ahead of their first bytes.
 * In libuv's pool each file was three requests (open, read, close), each a pool wakeup plus a callback
 * and a promise on the JS thread, and the store another trip through the JS thread: most of its time in
 * a cold walk of small files, which also delays the walker's own requests. Here a batch of files is one
 * call and one completion. Only regular files are read: names are opened O_NOFOLLOW | O_NONBLOCK (a FIFO
 * or device cannot block the thread) and fstat'ed before any read.
 */

/* One field of a version string `ino:size:mtimeNs:ctimeNs` (decimal, a '-' for negative values, as
 * JS prints the BigInts of a BigIntStats) against the value's bits; advances *p past the field. */
static int version_field(const char **p, uint64_t bits) {
  const char *q = *p;
  int neg = *q == '-';
  if (neg) q++;
  if (*q < '0' || *q > '9') return 0;
  uint64_t v = 0;
  while (*q >= '0' && *q <= '9') v = v * 10 + (uint64_t) (*q++ - '0');
  if (neg) v = (uint64_t) -(int64_t) v;
  if (*q == ':') q++;
  else if (*q != 0) return 0;
  *p = q;
  return v == bits;
}

/* Whether st is exactly the version JS reported to the kernel with the node's attributes. */
static int version_is(const struct stat *st, const char *version) {
  const char *p = version;
  uint64_t mtime = (uint64_t) ((int64_t) st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec);
  uint64_t ctime = (uint64_t) ((int64_t) st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec);
  return version_field(&p, (uint64_t) st->st_ino) && version_field(&p, (uint64_t) st->st_size) &&
         version_field(&p, mtime) && version_field(&p, ctime) && *p == 0;
}

/*
 * A store-ahead job (ll_store_ahead): the whole regular file `name` in directory fd m->ino2, if it is
 * still exactly the version the kernel was told (m->name2; checked before and after the read) and under
 * m->size bytes, goes into the page cache of node m->ino - unless JS bumped the epoch since it made the
 * job (m->off). Returns AHEAD_STORED, AHEAD_NO_NODE (the kernel does not hold the node: not yet, when
 * a listing's reply is still being taken in, or no more), or 0 (not stored). Node 0: only the host's
 * read-ahead of the file's first m->size bytes is started (readahead(2): no wait, nothing read into
 * memory, nothing stored); returns 0. The epoch is checked and the store written under store_rw
 * shared; every notification takes it exclusive before it is written (store_barrier), and JS bumps the
 * epoch before it asks for any invalidation of file contents: so a store either sees the bump and is
 * dropped, or reaches the kernel before the invalidation that follows the bump.
 */
enum { AHEAD_STORED = 1, AHEAD_NO_NODE = 2 };

static int ahead_one(ll_session *s, ll_msg *m) {
  int fd = openat((int) m->ino2, m->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return 0;
  int stored = 0;
  char *data = NULL;
  struct stat st;
  if (m->ino == 0) {
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
      (void) readahead(fd, 0, st.st_size < (off_t) m->size ? (size_t) st.st_size : (size_t) m->size);
  } else if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t) st.st_size < m->size &&
      version_is(&st, m->name2) && (data = malloc((size_t) st.st_size + 1)) != NULL) {
    ssize_t n;
    /* one byte more than the size: a file that grew since is not stored */
    do n = pread(fd, data, (size_t) st.st_size + 1, 0); while (n < 0 && errno == EINTR);
    struct stat after;
    if (n == st.st_size && fstat(fd, &after) == 0 && version_is(&after, m->name2)) {
      pthread_rwlock_rdlock(&s->store_rw);
      if (__atomic_load_n(s->epoch, __ATOMIC_ACQUIRE) == (int32_t) m->off) {
        struct fuse_bufvec bufv = FUSE_BUFVEC_INIT((size_t) n);
        bufv.buf[0].mem = data;
        int res = fuse_lowlevel_notify_store(s->se, m->ino, 0, &bufv, 0);
        stored = res == 0 ? AHEAD_STORED : res == -ENOENT ? AHEAD_NO_NODE : 0;
      }
      pthread_rwlock_unlock(&s->store_rw);
    }
  }
  free(data);
  close(fd);
  return stored;
}

static void *fetch_main(void *arg) {
  ll_session *s = arg;
  block_signals();
  pthread_setname_np(pthread_self(), "fuse-ll-fetch");
  pthread_mutex_lock(&s->flock);
  for (;;) {
    while (!s->fhead && !s->fstop) pthread_cond_wait(&s->fcond, &s->flock);
    ll_msg *m = s->fhead;
    if (!m) break; /* stop requested and nothing left */
    s->fhead = m->next;
    if (!s->fhead) s->ftail = NULL;
    int stop = s->fstop;
    pthread_mutex_unlock(&s->flock);
    int status = stop ? 0 : ahead_one(s, m);
    ll_msg *b = m->batch;
    b->data[m->index] = (char) status;
    free(m);
    pthread_mutex_lock(&s->flock);
    int last = --b->remaining == 0;
    pthread_mutex_unlock(&s->flock);
    if (last) queue_push(s, b);
    pthread_mutex_lock(&s->flock);
  }
  pthread_mutex_unlock(&s->flock);
  return NULL;
}

/* All fetch threads at the first job: a walk that reads ahead at all keeps several busy. */
static void start_fetch_threads(ll_session *s) {
  if (s->fetch_started == FETCH_THREADS) return;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, FETCH_STACK);
  while (s->fetch_started < FETCH_THREADS &&
         pthread_create(&s->fetch_threads[s->fetch_started], &attr, fetch_main, s) == 0)
    s->fetch_started++;
  pthread_attr_destroy(&attr);
}

static int one_component(const char *name, size_t len) {
  return len > 0 && len <= 255 && !memchr(name, '/', len) && !memchr(name, 0, len) &&
         !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

/* ll_store_epoch(session, Int32Array over a SharedArrayBuffer): the epoch store-ahead jobs check
 * (JS bumps element 0 before it invalidates file contents: bumpStoreEpoch). Once, before any job. */
napi_value ll_store_epoch(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  napi_typedarray_type tt;
  size_t len;
  void *data;
  if (s->epoch_ref || argc < 2 || napi_get_typedarray_info(env, argv[1], &tt, &len, &data, NULL, NULL) != napi_ok ||
      tt != napi_int32_array || len < 1) {
    napi_throw_type_error(env, NULL, "epoch must be an Int32Array, given once");
    return NULL;
  }
  CHECK(napi_create_reference(env, argv[1], 1, &s->epoch_ref));
  s->epoch = data;
  return NULL;
}

/* ll_store_ahead(session, dirFd, maxBytes, nodes: Float64Array, strings: Buffer) -> Promise<Buffer>
 * One job per node: strings holds `name\0version\0` for each, in the order of nodes. Each file is read
 * whole and stored into the page cache of its node on a fetch thread (node 0: its host read-ahead only);
 * see ahead_one. Once all are done the promise resolves with one status byte per node (1 stored, 2 the
 * kernel did not hold the node, 0 not stored). The caller keeps dirFd open until then. */
napi_value ll_store_ahead(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5], promise;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  int32_t dirfd;
  double max;
  napi_typedarray_type tt;
  size_t n, slen;
  void *nodes, *strings;
  if (argc < 5 || napi_get_value_int32(env, argv[1], &dirfd) != napi_ok || dirfd < 0 ||
      napi_get_value_double(env, argv[2], &max) != napi_ok || !(max > 0) ||
      napi_get_typedarray_info(env, argv[3], &tt, &n, &nodes, NULL, NULL) != napi_ok || tt != napi_float64_array ||
      napi_get_buffer_info(env, argv[4], &strings, &slen) != napi_ok) {
    napi_throw_type_error(env, NULL, "expected (session, dirFd, maxBytes, Float64Array, Buffer)");
    return NULL;
  }
  if (!s->epoch) {
    napi_throw_error(env, NULL, "ll_store_epoch was not called");
    return NULL;
  }
  /* split and check everything first: nothing is queued for a malformed batch */
  const char *p = strings, *end = (const char *) strings + slen;
  for (size_t i = 0; i < n; i++) {
    for (int k = 0; k < 2; k++) {
      const char *z = memchr(p, 0, (size_t) (end - p));
      if (!z || (k == 0 && !one_component(p, (size_t) (z - p))) || (k == 1 && z - p > 100)) {
        napi_throw_range_error(env, NULL, "strings must be name\\0version\\0 per node, names one path component");
        return NULL;
      }
      p = z + 1;
    }
  }
  ll_msg *b = msg_new(NULL, EV_AHEAD_DONE, 0);
  if (b) b->data = calloc(n ? n : 1, 1);
  if (!b || !b->data) { free(b); napi_throw_error(env, NULL, "out of memory"); return NULL; }
  b->s = s;
  b->datalen = n;
  if (napi_create_promise(env, &b->deferred, &promise) != napi_ok) { free(b->data); free(b); return NULL; }
  if (s->state == ST_LIVE && n > 0) start_fetch_threads(s);
  if (s->state != ST_LIVE || n == 0 || s->fetch_started == 0) {
    handle_event(s, env, b); /* all zero: nothing stored */
    return promise;
  }
  int32_t epoch = __atomic_load_n(s->epoch, __ATOMIC_ACQUIRE);
  ll_msg *head = NULL, *tail = NULL;
  size_t made = 0;
  p = strings;
  for (size_t i = 0; i < n; i++) {
    const char *name = p;
    size_t namelen = strlen(name);
    const char *version = name + namelen + 1;
    size_t vlen = strlen(version);
    p = version + vlen + 1;
    ll_msg *m = msg_new(NULL, EV_AHEAD_JOB, namelen + vlen + 2);
    if (!m) break;
    m->s = s;
    m->ino = (uint64_t) ((double *) nodes)[i];
    m->ino2 = (uint64_t) dirfd;
    m->off = (uint64_t) (uint32_t) epoch;
    m->size = (uint64_t) max;
    memcpy(m->buf, name, namelen + vlen + 2);
    m->name = m->buf;
    m->namelen = namelen;
    m->name2 = m->buf + namelen + 1;
    m->name2len = vlen;
    m->batch = b;
    m->index = i;
    if (tail) tail->next = m; else head = m;
    tail = m;
    made++;
  }
  if (made == 0) {
    handle_event(s, env, b);
    return promise;
  }
  b->remaining = (int) made;
  /* one lock and one wakeup per thread for the whole batch */
  pthread_mutex_lock(&s->flock);
  if (s->ftail) s->ftail->next = head; else s->fhead = head;
  s->ftail = tail;
  pthread_cond_broadcast(&s->fcond);
  pthread_mutex_unlock(&s->flock);
  return promise;
}
