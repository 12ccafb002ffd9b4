/*
 * The binding's internal header: the request record, the per-mount session and the functions the
 * files share. One concern per file:
 *   queue.c    the request queue and the JS thread's read loop (uv_poll on /dev/fuse)
 *   decode.c   libfuse's low-level callbacks: each request copied into one record and queued
 *   dispatch.c records and events handed to the JS dispatcher (argument conversion, payloads)
 *   reply.c    the fuse_reply_* functions JS answers with
 *   notify.c   the notifier thread (fuse_lowlevel_notify_*)
 *   fetch.c    the fetch threads (store-ahead: files read and stored into the kernel's page cache)
 *   fast.c     the write fast path: WRITEs on registered files answered in C, never entering JS
 *   fast-read.c the read fast path: READs of registered files answered in C from the host's page cache
 *   fast-entries.c  the lookup fast path: LOOKUP misses in marked directories answered in C
 *   fast-create.c   the create fast path: CREATEs in those directories answered in C
 *   fast-listing.c  the listing fast path: READDIR(PLUS) of those directories answered in C
 *   session.c  a mount's life: create, mount, close, teardown
 *   host-io.c  host syscalls Node lacks or rounds
 *   addon.c    the module's entry point (what JS sees)
 *
 * Threads: the JS thread reads /dev/fuse itself (non-blocking, watched with uv_poll), lets libfuse
 * decode each request into a heap record and dispatches the batch to JS; JS answers whenever it likes
 * through fuse_reply_* (libfuse allows replying at any later time). No thread ever waits for JS. Reading
 * on the JS thread costs one wakeup per request: a separate reader thread would cost two (the kernel wakes
 * it, it wakes the JS thread through an eventfd), which on busy cores is most of a request's cost. The
 * notifier thread performs fuse_lowlevel_notify_* writes (see notify.c for why); the fetch threads,
 * started at the first storeAhead, read the files the filesystem's read-ahead asks for and store them
 * (see fetch.c). Everything touching napi or the session refcount happens on the JS thread.
 */
#ifndef FUSE_NATIVE_LL_H
#define FUSE_NATIVE_LL_H

/* libfuse 3.14 (Debian bookworm's libfuse3-dev): kernel protocol 7.36 with the features the mount asks
 * for in ll_init (max_pages, readdirplus, writeback cache, parallel dirops, ...). */
#define FUSE_USE_VERSION 314
#define _GNU_SOURCE

#include <node_api.h>
#include <uv.h>
#include <fuse_lowlevel.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Request kinds. The order is the contract with the TS front (src/ops.ts), which reads it from ll_ops. */
enum {
  OP_NONE = 0,
  OP_LOOKUP, OP_FORGET, OP_GETATTR, OP_SETATTR, OP_READLINK, OP_MKNOD, OP_MKDIR, OP_UNLINK,
  OP_RMDIR, OP_SYMLINK, OP_RENAME, OP_LINK, OP_OPEN, OP_READ, OP_WRITE, OP_FLUSH, OP_RELEASE,
  OP_FSYNC, OP_OPENDIR, OP_READDIR, OP_RELEASEDIR, OP_FSYNCDIR, OP_STATFS, OP_SETXATTR,
  OP_GETXATTR, OP_LISTXATTR, OP_REMOVEXATTR, OP_ACCESS, OP_CREATE, OP_FORGET_MULTI,
  OP_FALLOCATE, OP_READDIRPLUS,
  OP_COUNT, /* at most 53: `implemented` crosses from JS as a double */
  /* internal events, never exposed as handlers */
  EV_INIT = 100, EV_EXIT, EV_NOTIFY_DONE, EV_AHEAD_JOB, EV_AHEAD_DONE, EV_FAST_WRITES, EV_FAST_READS, EV_FAST_CREATES
};

/* The write fast path's state array, shared with JS (src/fast-writes.ts): the quota bytes C may still
 * charge (Infinity: no quota), the bytes charged and not yet folded, the caller uid served (-1: any). */
enum { FS_GRANT = 0, FS_PENDING = 1, FS_CALLER_UID = 2, FS_COUNT = 4 };

/* Fetch threads (fetch.c), all started at the first storeAhead; a small stack each. */
#define FETCH_THREADS 8
#define FETCH_STACK (256 * 1024)

enum { NOTIFY_INVAL_INODE = 1, NOTIFY_INVAL_ENTRY = 2, NOTIFY_DELETE = 3, NOTIFY_STORE = 4 };

enum { ST_NEW = 0, ST_LIVE = 1, ST_CLOSED = 2 };

typedef struct ll_session ll_session;

/* A WRITE payload handed to JS inside its receive buffer (see ll_write). Owned jointly by the JS Buffer
 * (its finalizer) and the request record (req_finalize): whichever of the two goes last frees this. */
typedef struct ll_payload {
  char *base;    /* the receive buffer; NULL once freed or taken back */
  int recycled;  /* taken back by replyWrite: the Buffer is detached, the finalizer must not free base */
  int refs;
} ll_payload;

/* One queued request or event. For requests it doubles as the JS-visible handle (a napi
 * external), so the fuse_req_t and the "already replied" flag live exactly as long as JS can
 * reach them. Names are copied into buf[] because they point into libfuse's receive buffer,
 * which is reused for the next request (handlers answer later). */
typedef struct ll_msg {
  struct ll_msg *next;
  ll_session *s;
  fuse_req_t req;
  int kind;
  int replied;
  uint32_t uid, gid, pid;
  uint64_t ino;     /* ino or parent */
  uint64_t ino2;    /* newparent / child */
  uint64_t fh;
  int has_fh;
  uint64_t off;     /* offset, nlookup, rdev */
  uint64_t size;
  uint32_t flags;   /* open flags, mask, datasync, to_set, xattr flags */
  uint32_t mode;
  /* setattr only */
  uint32_t sa_uid, sa_gid;
  struct timespec sa_atime, sa_mtime; /* full timespecs: JS gets seconds and nanoseconds exactly */
  char *data;       /* write payload or forget array, malloc'ed, ownership moves to JS */
  char *data_base;  /* when data points into a handed-over receive buffer: the allocation to free */
  ll_payload *payload; /* WRITE: the handed-over receive buffer, once it is a JS Buffer */
  size_t datalen;
  const char *name; size_t namelen;
  const char *name2; size_t name2len;
  /* rename only (fast-rename.c): what it ends (FRN_*) and, FRN_NODES, the moved and the replaced node */
  int rename_ends;
  uint64_t rename_nodes[2];
  /* notify, fetch */
  int result;
  napi_deferred deferred;
  struct ll_msg *batch; /* store-ahead job: its batch (an EV_AHEAD_DONE message) */
  int remaining;    /* store-ahead batch: jobs not finished yet (under flock) */
  size_t index;     /* store-ahead job: its place in the batch's status bytes (the batch's data) */
  char buf[];
} ll_msg;

struct ll_session {
  napi_env env;
  napi_ref dispatch_ref;
  napi_ref scratch_ref;
  double *scratch;
  size_t scratch_len;
  napi_ref resource_ref;
  napi_async_context actx;
  uint64_t implemented; /* bit per OP_* with a JS handler */
  uint32_t features;    /* FEAT_* the mount asks for (each only if the kernel offers it) */
  uint32_t max_write_wanted;

  struct fuse_session *se;
  int state;
  int refs;               /* JS thread only */
  int exit_seen;

  /* /dev/fuse is read on the JS thread: uv_poll on the channel's fd (O_NONBLOCK), one buffer. */
  uv_poll_t poll;
  int poll_open;
  struct fuse_buf rbuf; /* libfuse allocates .mem on the first read (se->bufsize), we free it */
  pthread_t js_thread;
  int in_poll; /* JS thread only: set while on_poll reads requests (it drains the queue itself) */
  /* A receive buffer replyWrite took back (recycle_payload), reused for the next big WRITE. A fresh
   * malloc of 1 MiB is a fresh mmap here (the worker sets MALLOC_MMAP_THRESHOLD_), so the kernel had to
   * fault in and zero its 256 pages while copying the next payload into it. JS thread only. */
  char *spare;

  pthread_mutex_t qlock;
  ll_msg *qhead, *qtail;
  uv_async_t async;
  int async_open;

  pthread_t notify_thread;
  int notify_started;
  pthread_mutex_t nlock;
  pthread_cond_t ncond;
  ll_msg *nhead, *ntail;
  int nstop;

  /* fetch threads (fetch_main): started at the first ll_store_ahead, joined at teardown */
  pthread_t fetch_threads[FETCH_THREADS];
  int fetch_started; /* how many run */
  pthread_mutex_t flock;
  pthread_cond_t fcond;
  ll_msg *fhead, *ftail;
  int fstop;
  /* store-ahead: stores from the fetch threads take it shared, every notification on the notifier
   * thread exclusive first (see store_barrier); the epoch JS bumps before invalidating file contents */
  pthread_rwlock_t store_rw;
  int32_t *epoch;
  napi_ref epoch_ref;

  /* the write fast path (fast.c); JS thread only */
  struct fast_ent **fast_tab; /* NULL until ll_fast_init */
  double *fast_state;         /* FS_* */
  napi_ref fast_state_ref, fast_report_ref;
  uint32_t fast_gen;          /* bumped when every registration must be made again */
  double *fast_dirty;         /* nodes written since the last report */
  size_t fast_ndirty, fast_cap;
  uint64_t fast_writes;       /* writes since the last report */
  int fast_reporting;
  struct fast_read *fast_read; /* the read fast path (fast-read.c), NULL until ll_fast_read_init */
  struct fe_state *fentries; /* the lookup fast path (fast-entries.c); NULL until ll_fentry_init */
  struct fc_state *fcreate;  /* the create fast path (fast-create.c); NULL until ll_fcreate_init */
  struct fl_state *flist;    /* the listing fast path's kept listings (fast-listing.c); NULL until used */
  int narrow_renames;        /* RENAMEs of a non-directory end only their nodes' state (fast-rename.c) */

  napi_deferred mount_deferred;
  napi_deferred closed_deferred;
  /* filled by init() (in on_poll), read when EV_INIT is dispatched */
  unsigned proto_major, proto_minor, max_write, max_readahead, capable, want;
};

/* Features the JS side asks for (src/options.ts FEATURES). Each is requested in ll_init only when the
 * kernel offers it, so an older kernel falls back to the protocol-7.19 behaviour for that feature. */
enum {
  FEAT_WRITEBACK_CACHE = 1 << 0,
  FEAT_READDIRPLUS = 1 << 1,
  FEAT_PARALLEL_DIROPS = 1 << 2,
  FEAT_CACHE_SYMLINKS = 1 << 3,
  FEAT_ASYNC_DIO = 1 << 4
};

#define CHECK(call) do { if ((call) != napi_ok) { napi_throw_error(env, NULL, "napi call failed: " #call); return NULL; } } while (0)

/* queue.c */
void queue_push(ll_session *s, ll_msg *m);
ll_msg *msg_new(fuse_req_t req, int kind, size_t extra);
void block_signals(void);
void on_async(uv_async_t *h);
void on_poll(uv_poll_t *h, int status, int events);

/* decode.c */
extern const struct fuse_lowlevel_ops ll_ops;

/* dispatch.c */
napi_value mkuint(napi_env env, uint32_t v);
void dispatch_one(ll_session *s, napi_env env, napi_value dispatch, napi_value global, ll_msg *m);
void handle_event(ll_session *s, napi_env env, ll_msg *m);

/* session.c */
void session_unref(ll_session *s);
int session_live(ll_session *s);
void async_closed(uv_handle_t *h);
void settle_closed(ll_session *s, napi_env env);
void reject_mount(ll_session *s, napi_env env, const char *msg);
void session_teardown(ll_session *s);
ll_session *get_session(napi_env env, napi_value v);
/* A JS number that is a node id, fd or count: a non-negative safe integer. 0: not one. */
int get_u64(napi_env env, napi_value v, uint64_t *out);
napi_value ll_new(napi_env env, napi_callback_info info);
napi_value ll_mount(napi_env env, napi_callback_info info);
napi_value ll_closed(napi_env env, napi_callback_info info);

/* notify.c */
void *notify_main(void *arg);
napi_value ll_notify(napi_env env, napi_callback_info info);

/* fetch.c */
napi_value ll_store_epoch(napi_env env, napi_callback_info info);
napi_value ll_store_ahead(napi_env env, napi_callback_info info);

/* fast.c */
int fast_write(ll_session *s, fuse_req_t req, uint64_t ino, const char *buf, size_t size, off_t off);
void fast_forget_ino(ll_session *s, uint64_t ino);
void fast_invalidate(ll_session *s);
void fast_after_reply(ll_msg *m);
int fast_register_fd(ll_session *s, uint64_t ino, int fd, int direct);
int fast_fd_of(ll_session *s, uint64_t ino);
void fast_report(ll_session *s);
void fast_report_event(ll_session *s, napi_env env, ll_msg *m);
void report_f64_event(napi_env env, napi_ref ref, ll_msg *m);
void fast_free(ll_session *s);
napi_value ll_fast_init(napi_env env, napi_callback_info info);
napi_value ll_fast_register(napi_env env, napi_callback_info info);
napi_value ll_fast_drop(napi_env env, napi_callback_info info);
napi_value ll_fast_invalidate(napi_env env, napi_callback_info info);
napi_value ll_fast_fold(napi_env env, napi_callback_info info);

/* fast-read.c */
#include "fast-read.h"

/* reply.c */
napi_value reply_err(napi_env env, napi_callback_info info);
napi_value reply_entry(napi_env env, napi_callback_info info);
napi_value reply_create(napi_env env, napi_callback_info info);
napi_value reply_attr(napi_env env, napi_callback_info info);
napi_value reply_readlink(napi_env env, napi_callback_info info);
napi_value reply_open(napi_env env, napi_callback_info info);
napi_value reply_buf(napi_env env, napi_callback_info info);
napi_value reply_write(napi_env env, napi_callback_info info);
napi_value reply_statfs(napi_env env, napi_callback_info info);
napi_value reply_xattr(napi_env env, napi_callback_info info);
napi_value req_replied(napi_env env, napi_callback_info info);

/* host-io.c */
void fuse_hostio_register(napi_env env, napi_value exports);

#endif
