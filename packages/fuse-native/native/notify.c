/* Notifications: fuse_lowlevel_notify_* on the notifier thread, in the order JS asked for them. */
#include "ll.h"

/* Before a notification is written: waits for the stores in progress on the fetch threads (see
 * ahead_one). Those may wait for a READ to be answered (the page lock), which only delays this thread. */
static void store_barrier(ll_session *s) {
  pthread_rwlock_wrlock(&s->store_rw);
  pthread_rwlock_unlock(&s->store_rw);
}

/*
 * Notifications run here, never on the JS thread. fuse_lowlevel_notify_* is a blocking write()
 * to /dev/fuse, and the kernel processes it synchronously: inval_entry takes the parent
 * directory's inode lock, inval_inode locks the page-cache pages it drops. Those locks can be
 * held by a syscall that is itself waiting for a FUSE reply (unlink/create/rename hold the
 * directory lock; a read holds a locked page) - a reply that only the JS thread can send. Doing
 * the write on the JS thread would deadlock the mount; here it just waits until JS answers.
 */
void *notify_main(void *arg) {
  ll_session *s = arg;
  block_signals();
  pthread_setname_np(pthread_self(), "fuse-ll-notify");
  pthread_mutex_lock(&s->nlock);
  for (;;) {
    while (!s->nhead && !s->nstop) pthread_cond_wait(&s->ncond, &s->nlock);
    ll_msg *m = s->nhead;
    if (!m) break; /* stop requested and nothing left */
    s->nhead = m->next;
    if (!s->nhead) s->ntail = NULL;
    int stop = s->nstop;
    pthread_mutex_unlock(&s->nlock);
    int res;
    if (!stop) store_barrier(s);
    if (stop) {
      res = -ENOTCONN;
    } else if (m->kind == NOTIFY_INVAL_INODE) {
      res = fuse_lowlevel_notify_inval_inode(s->se, m->ino, (off_t) m->off, (off_t) m->size);
    } else if (m->kind == NOTIFY_INVAL_ENTRY) {
      res = fuse_lowlevel_notify_inval_entry(s->se, m->ino, m->name, m->namelen);
    } else if (m->kind == NOTIFY_STORE) {
      /* store locks each page it fills, as a READ in flight does: here it waits for JS too */
      struct fuse_bufvec bufv = FUSE_BUFVEC_INIT(m->namelen);
      bufv.buf[0].mem = m->buf;
      res = fuse_lowlevel_notify_store(s->se, m->ino, (off_t) m->off, &bufv, 0);
    } else {
      res = fuse_lowlevel_notify_delete(s->se, m->ino, m->ino2, m->name, m->namelen);
    }
    m->result = res < 0 ? -res : res;
    m->kind = EV_NOTIFY_DONE;
    queue_push(s, m);
    pthread_mutex_lock(&s->nlock);
  }
  pthread_mutex_unlock(&s->nlock);
  return NULL;
}

/* ll_notify(session, kind, ino, a, b, name?: Buffer) -> Promise<errno>
 * store: a = offset, the Buffer is the data (copied here: JS may reuse it at once) */
napi_value ll_notify(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6], promise;
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = get_session(env, argv[0]);
  if (!s) return NULL;
  uint32_t kind;
  double ino, a, b;
  CHECK(napi_get_value_uint32(env, argv[1], &kind));
  CHECK(napi_get_value_double(env, argv[2], &ino));
  CHECK(napi_get_value_double(env, argv[3], &a));
  CHECK(napi_get_value_double(env, argv[4], &b));
  if (kind < NOTIFY_INVAL_INODE || kind > NOTIFY_STORE) {
    napi_throw_range_error(env, NULL, "unknown notification kind");
    return NULL;
  }
  void *name = NULL;
  size_t namelen = 0;
  if (kind != NOTIFY_INVAL_INODE) {
    if (argc < 6 || napi_get_buffer_info(env, argv[5], &name, &namelen) != napi_ok) {
      napi_throw_type_error(env, NULL, "name must be a Buffer");
      return NULL;
    }
  }
  ll_msg *m = msg_new(NULL, (int) kind, namelen + 1);
  if (!m) { napi_throw_error(env, NULL, "out of memory"); return NULL; }
  m->s = s;
  m->ino = (uint64_t) ino;
  /* inval_inode: offset and length are signed (offset < 0 = attributes only); via int64_t
   * because converting a negative double straight to uint64_t is undefined behaviour */
  m->off = (uint64_t) (int64_t) a;
  m->size = (uint64_t) (int64_t) b;
  m->ino2 = (uint64_t) (int64_t) a; /* delete: child */
  if (name) { memcpy(m->buf, name, namelen); }
  m->buf[namelen] = 0;
  m->name = m->buf;
  m->namelen = namelen;
  if (napi_create_promise(env, &m->deferred, &promise) != napi_ok) { free(m); return NULL; }
  if (s->state != ST_LIVE || !s->notify_started) {
    napi_resolve_deferred(env, m->deferred, mkuint(env, ENOTCONN));
    free(m);
    return promise;
  }
  pthread_mutex_lock(&s->nlock);
  if (s->ntail) s->ntail->next = m; else s->nhead = m;
  s->ntail = m;
  pthread_cond_signal(&s->ncond);
  pthread_mutex_unlock(&s->nlock);
  return promise;
}
