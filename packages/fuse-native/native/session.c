/* A mount's life: the session object JS holds, mounting, the closed promise and the teardown once the
 * kernel connection is gone. */
#include "ll.h"
#include "fast-entries.h"
#include "fast-create.h"
#include "fast-listing.h"

void session_unref(ll_session *s) {
  if (--s->refs > 0) return;
  pthread_mutex_destroy(&s->qlock);
  pthread_mutex_destroy(&s->nlock);
  pthread_cond_destroy(&s->ncond);
  pthread_mutex_destroy(&s->flock);
  pthread_cond_destroy(&s->fcond);
  pthread_rwlock_destroy(&s->store_rw);
  fast_free(s);
  fast_read_free(s, NULL);
  fentry_free(s);
  fcreate_release(s, NULL);
  flist_free(s);
  free(s);
}

int session_live(ll_session *s) {
  return s->state == ST_LIVE && s->se != NULL;
}

void async_closed(uv_handle_t *h) {
  ll_session *s = h->data;
  session_unref(s);
}

static void poll_closed(uv_handle_t *h) {
  ll_session *s = h->data;
  free(s->rbuf.mem);
  s->rbuf.mem = NULL;
  free(s->spare);
  s->spare = NULL;
  session_unref(s);
}

/* Stops reading /dev/fuse. Must run before the fd is closed (fuse_session_destroy). */
static void poll_close(ll_session *s) {
  if (!s->poll_open) return;
  s->poll_open = 0;
  uv_close((uv_handle_t *) &s->poll, poll_closed);
}

void settle_closed(ll_session *s, napi_env env) {
  if (s->closed_deferred) {
    napi_value u;
    napi_get_undefined(env, &u);
    napi_resolve_deferred(env, s->closed_deferred, u);
    s->closed_deferred = NULL;
  }
}

void reject_mount(ll_session *s, napi_env env, const char *msg) {
  if (!s->mount_deferred) return;
  napi_value str, err;
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &str);
  napi_create_error(env, NULL, str, &err);
  napi_reject_deferred(env, s->mount_deferred, err);
  s->mount_deferred = NULL;
}

/* Called once the kernel connection has gone: stop polling, join the notifier, free libfuse state. */
void session_teardown(ll_session *s) {
  poll_close(s);
  if (s->notify_started) {
    pthread_mutex_lock(&s->nlock);
    s->nstop = 1;
    pthread_cond_signal(&s->ncond);
    pthread_mutex_unlock(&s->nlock);
    pthread_join(s->notify_thread, NULL);
    s->notify_started = 0;
  }
  if (s->fetch_started) {
    /* jobs still queued complete with ECANCELED; their completions are drained after this */
    pthread_mutex_lock(&s->flock);
    s->fstop = 1;
    pthread_cond_broadcast(&s->fcond);
    pthread_mutex_unlock(&s->flock);
    for (int i = 0; i < s->fetch_started; i++) pthread_join(s->fetch_threads[i], NULL);
    s->fetch_started = 0;
  }
  s->state = ST_CLOSED;
  if (s->se) {
    /* destroys the channel too, which closes the /dev/fuse fd (the mount is already gone) */
    fuse_session_destroy(s->se);
    s->se = NULL;
  }
}

ll_session *get_session(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok || !p) {
    napi_throw_type_error(env, NULL, "expected a low-level FUSE session handle");
    return NULL;
  }
  return p;
}

int get_u64(napi_env env, napi_value v, uint64_t *out) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok || !(d >= 0) || d > 9007199254740991.0) return 0;
  *out = (uint64_t) d;
  return 1;
}

static void session_finalize(napi_env env, void *data, void *hint) {
  (void) hint; /* a napi_finalize; none given */
  ll_session *s = data;
  if (s->scratch_ref) { napi_delete_reference(env, s->scratch_ref); s->scratch_ref = NULL; }
  if (s->epoch_ref) { napi_delete_reference(env, s->epoch_ref); s->epoch_ref = NULL; }
  /* the state array goes with its references: no write is served from here on */
  fast_free(s);
  fast_read_free(s, env);
  s->fast_state = NULL;
  if (s->fast_state_ref) { napi_delete_reference(env, s->fast_state_ref); s->fast_state_ref = NULL; }
  if (s->fast_report_ref) { napi_delete_reference(env, s->fast_report_ref); s->fast_report_ref = NULL; }
  fentry_release(s, env);
  fcreate_release(s, env);
  flist_free(s);
  session_unref(s);
}

/* ll_new(dispatch: Function, scratch: Float64Array, implementedMask: number (a sum of 2^op, < 2^53)) -> session */
napi_value ll_new(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  napi_typedarray_type tt;
  size_t len;
  void *data;
  if (napi_get_typedarray_info(env, argv[1], &tt, &len, &data, NULL, NULL) != napi_ok || tt != napi_float64_array || len < 16) {
    napi_throw_type_error(env, NULL, "scratch must be a Float64Array(16)");
    return NULL;
  }
  double maskd;
  CHECK(napi_get_value_double(env, argv[2], &maskd));
  uint64_t mask = (uint64_t) maskd;
  ll_session *s = calloc(1, sizeof(ll_session));
  if (!s) { napi_throw_error(env, NULL, "out of memory"); return NULL; }
  s->env = env;
  s->implemented = mask;
  s->scratch = data;
  s->scratch_len = len;
  s->refs = 1; /* the JS session object */
  pthread_mutex_init(&s->qlock, NULL);
  pthread_mutex_init(&s->nlock, NULL);
  pthread_cond_init(&s->ncond, NULL);
  pthread_mutex_init(&s->flock, NULL);
  pthread_cond_init(&s->fcond, NULL);
  pthread_rwlockattr_t rwa;
  pthread_rwlockattr_init(&rwa);
  /* an invalidation waits for the stores in progress, not for every store queued after it */
  pthread_rwlockattr_setkind_np(&rwa, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&s->store_rw, &rwa);
  pthread_rwlockattr_destroy(&rwa);
  napi_create_reference(env, argv[0], 1, &s->dispatch_ref);
  napi_create_reference(env, argv[1], 1, &s->scratch_ref);
  napi_value ext;
  CHECK(napi_create_external(env, s, session_finalize, NULL, &ext));
  return ext;
}

/* ll_mount(session, mountpoint: string, args: string[], features: number, maxWrite: number)
 *   -> Promise<connInfo> */
napi_value ll_mount(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  if (s->state != ST_NEW || !s->dispatch_ref) {
    napi_throw_error(env, NULL, "this LowLevelFuse was already mounted");
    return NULL;
  }
  char mp[4096];
  size_t mplen;
  if (napi_get_value_string_utf8(env, argv[1], mp, sizeof(mp), &mplen) != napi_ok || mplen >= sizeof(mp) - 1) {
    napi_throw_type_error(env, NULL, "bad mountpoint");
    return NULL;
  }
  CHECK(napi_get_value_uint32(env, argv[3], &s->features));
  CHECK(napi_get_value_uint32(env, argv[4], &s->max_write_wanted));

  struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
  uint32_t n;
  CHECK(napi_get_array_length(env, argv[2], &n));
  for (uint32_t i = 0; i < n; i++) {
    napi_value el;
    char a[4096];
    size_t alen;
    CHECK(napi_get_element(env, argv[2], i, &el));
    if (napi_get_value_string_utf8(env, el, a, sizeof(a), &alen) != napi_ok || alen >= sizeof(a) - 1) {
      fuse_opt_free_args(&args);
      napi_throw_type_error(env, NULL, "bad mount argument");
      return NULL;
    }
    fuse_opt_add_arg(&args, a);
  }

  napi_value promise;
  CHECK(napi_create_promise(env, &s->mount_deferred, &promise));

  struct fuse_session *se = fuse_session_new(&args, &ll_ops, sizeof(ll_ops), s);
  fuse_opt_free_args(&args);
  if (!se) {
    reject_mount(s, env, "fuse_session_new failed (bad option? libfuse printed the reason on stderr)");
    return promise;
  }
  /* As root libfuse mounts with mount(2) directly; otherwise it runs fusermount3. */
  if (fuse_session_mount(se, mp) != 0) {
    fuse_session_destroy(se);
    reject_mount(s, env, "fuse_session_mount failed (libfuse printed the reason on stderr): is /dev/fuse accessible and the mountpoint an existing, unmounted directory?");
    return promise;
  }
  s->se = se;

  uv_loop_t *loop;
  CHECK(napi_get_uv_event_loop(env, &loop));
  uv_async_init(loop, &s->async, on_async);
  s->async.data = s;
  s->async_open = 1;
  s->refs++; /* released in async_closed */
  s->js_thread = pthread_self();

  napi_value resource, name;
  napi_create_object(env, &resource);
  napi_create_reference(env, resource, 1, &s->resource_ref);
  napi_create_string_utf8(env, "fuse-native:lowlevel", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, resource, name, &s->actx);

  s->state = ST_LIVE;
  if (pthread_create(&s->notify_thread, NULL, notify_main, s) == 0) s->notify_started = 1;
  int fd = fuse_session_fd(se);
  int fl = fcntl(fd, F_GETFL);
  memset(&s->rbuf, 0, sizeof(s->rbuf));
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || uv_poll_init(loop, &s->poll, fd) != 0) {
    /* cannot read the device: unmount and let the exit path clean up (rejects the mount) */
    fuse_session_exit(se);
    fuse_session_unmount(se);
    ll_msg *m = msg_new(NULL, EV_EXIT, 0);
    m->s = s;
    queue_push(s, m);
    return promise;
  }
  s->poll.data = s;
  s->poll_open = 1;
  s->refs++; /* released in poll_closed */
  uv_poll_start(&s->poll, UV_READABLE, on_poll);
  return promise;
}

/* ll_closed(session) -> Promise<void>, settled once the connection is gone and all is freed */
napi_value ll_closed(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], promise;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  if (s->closed_deferred) {
    napi_throw_error(env, NULL, "ll_closed called twice");
    return NULL;
  }
  napi_deferred d;
  CHECK(napi_create_promise(env, &d, &promise));
  if (s->state != ST_LIVE || !s->async_open) {
    napi_value u;
    napi_get_undefined(env, &u);
    napi_resolve_deferred(env, d, u);
  } else {
    s->closed_deferred = d;
  }
  return promise;
}
