/* The request queue and the JS thread's read loop. Records (requests, completions of the notifier and
 * fetch threads) are queued from any thread and dispatched to JS in batches on the JS thread. */
#include "ll.h"
#include "fast-create.h"

void queue_push(ll_session *s, ll_msg *m) {
  /* Writes the fast path served go to JS before any request read after them (fast.c). Requests are
   * only queued on the JS thread, where the fast path's state lives. */
  if (m->kind < EV_INIT && fcreate_pending(s)) fcreate_report(s);
  if (m->kind < EV_INIT && s->fast_writes) fast_report(s);
  if (m->kind < EV_INIT && fast_read_pending(s)) fast_read_report(s);
  m->next = NULL;
  pthread_mutex_lock(&s->qlock);
  if (s->qtail) s->qtail->next = m; else s->qhead = m;
  s->qtail = m;
  pthread_mutex_unlock(&s->qlock);
  /* Pushed from on_poll: it drains the queue before it returns, no wakeup needed. Otherwise
   * (the notifier thread) uv_async_send, which coalesces: many pushes, one wakeup. */
  if (pthread_equal(pthread_self(), s->js_thread) && s->in_poll) return;
  uv_async_send(&s->async);
}

ll_msg *msg_new(fuse_req_t req, int kind, size_t extra) {
  ll_msg *m = malloc(sizeof(ll_msg) + extra);
  if (!m) return NULL;
  memset(m, 0, sizeof(ll_msg));
  m->req = req;
  m->kind = kind;
  if (req) {
    const struct fuse_ctx *c = fuse_req_ctx(req);
    m->uid = c->uid; m->gid = c->gid; m->pid = c->pid;
    m->s = fuse_req_userdata(req);
  }
  return m;
}


void block_signals(void) {
  /* Node owns signal handling; these threads must never receive SIGINT/SIGTERM/SIGCHLD. */
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
}

/* Dispatches every queued request and event to JS (JS thread). */
static void drain_queue(ll_session *s) {
  napi_env env = s->env;
  napi_handle_scope hs;
  napi_callback_scope cs;
  napi_value resource, dispatch, global;

  napi_open_handle_scope(env, &hs);
  napi_get_reference_value(env, s->resource_ref, &resource);
  napi_get_reference_value(env, s->dispatch_ref, &dispatch);
  napi_get_global(env, &global);
  /* One callback scope per wakeup: promise jobs queued by handlers run once, after the batch. */
  napi_open_callback_scope(env, resource, s->actx, &cs);

  for (;;) {
    pthread_mutex_lock(&s->qlock);
    ll_msg *batch = s->qhead;
    s->qhead = s->qtail = NULL;
    pthread_mutex_unlock(&s->qlock);
    if (!batch) {
      if (s->exit_seen && s->state != ST_CLOSED) {
        /* teardown joins the notifier, which may queue final completions: loop once more */
        session_teardown(s);
        continue;
      }
      break;
    }
    while (batch) {
      ll_msg *m = batch;
      batch = m->next;
      napi_handle_scope inner;
      napi_open_handle_scope(env, &inner);
      if (m->kind >= EV_INIT) handle_event(s, env, m);
      else dispatch_one(s, env, dispatch, global, m);
      napi_close_handle_scope(env, inner);
    }
  }

  int closing = s->state == ST_CLOSED && s->async_open;
  if (closing) {
    reject_mount(s, env, "FUSE session ended before INIT completed");
    settle_closed(s, env);
  }
  napi_close_callback_scope(env, cs);
  napi_close_handle_scope(env, hs);
  if (closing) {
    s->async_open = 0;
    napi_async_destroy(env, s->actx);
    napi_delete_reference(env, s->dispatch_ref);
    napi_delete_reference(env, s->resource_ref);
    s->dispatch_ref = s->resource_ref = NULL;
    uv_close((uv_handle_t *) &s->async, async_closed);
  }
}

void on_async(uv_async_t *h) {
  drain_queue(h->data);
}

/* At most this many requests are read per wakeup, so a burst cannot starve the rest of the event
 * loop (the control socket); epoll is level-triggered, the remainder is read on the next turn. */
#define POLL_BATCH 64

/* /dev/fuse is readable (or errored: the connection is gone). Reads what is ready, lets libfuse
 * decode it (the ll_* callbacks queue records), then dispatches the batch to JS. */
void on_poll(uv_poll_t *h, int status, int events) {
  (void) events; /* only UV_READABLE is watched; an error shows in status */
  ll_session *s = h->data;
  int exited = status < 0; /* POLLERR: the kernel aborted or unmounted the connection */
  s->in_poll = 1;
  for (int i = 0; i < POLL_BATCH && !exited && s->se; i++) {
    int res = fuse_session_receive_buf(s->se, &s->rbuf);
    if (res == -EINTR) continue;
    if (res == -EAGAIN) break;
    /* 0: ENODEV (unmounted; libfuse marked the session exited); < 0: a read error, as fatal as in
     * fuse_session_loop */
    if (res <= 0) { exited = 1; break; }
    fuse_session_process_buf(s->se, &s->rbuf);
  }
  fcreate_report(s);
  fast_report(s);
  fast_read_report(s);
  if (exited && s->poll_open) {
    uv_poll_stop(&s->poll);
    ll_msg *m = msg_new(NULL, EV_EXIT, 0);
    /* if malloc failed JS never learns of the exit; out of memory is fatal anyway */
    if (m) { m->s = s; queue_push(s, m); }
  }
  s->in_poll = 0;
  drain_queue(s);
}
