// The policy point's relay (src/relay.ts): an allowed tunnel's two sockets moved by the kernel with
// splice(2) through one pipe per direction, on one epoll thread per policy point, so the bytes never
// reach JavaScript. Node hands over duplicated descriptors and closes its own; from then on only this
// thread reads, writes and closes them.
//   create(onEnd(id, bytesUp, bytesDown, errno)) -> relay
//   add(relay, clientFd, upstreamFd, headUp?, headDown?) -> id   (the heads are written first)
//   close(relay, id) -> bool     (a live rule change: both sides are shut down, the end is reported)
//   count(relay) -> open relayed connections
// The same thread runs the C accept path (fast.c): its listeners and accepted connections share this
// epoll set, told apart by their first field (relay.h).
// Half-close: a side's EOF becomes shutdown(SHUT_WR) of the other once its pipe is drained. Fairness:
// at most TURN_BUDGET bytes per direction per connection per epoll turn (level-triggered, so what is
// left is taken at the next turn, after the other connections had theirs).
#include "relay.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

static void set_mask(struct relay *r, struct end *e, uint32_t want) {
  if (e->hup && want == 0) {
    // A hung-up socket is reported at every turn: stop watching it while nothing is wanted from it.
    if (e->watched) epoll_ctl(r->epfd, EPOLL_CTL_DEL, e->fd, NULL);
    e->watched = 0;
    e->mask = 0;
    return;
  }
  if (e->watched && e->mask == want) return;
  struct epoll_event ev = {.events = want, .data.ptr = e};
  if (epoll_ctl(r->epfd, e->watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, e->fd, &ev) == 0) {
    e->watched = 1;
    e->mask = want;
  }
}

// What each socket waits for: readable while its outgoing pipe is empty (one pipe-full in flight per
// direction: back-pressure), writable while something waits to be written to it.
void update_masks(struct relay *r, struct conn *c) {
  for (int s = 0; s < 2; s++) {
    struct dir *out = &c->dirs[s], *in = &c->dirs[1 - s];
    uint32_t want = 0;
    if (!out->eof && out->pending == 0 && out->head_off == out->head_len) want |= EPOLLIN;
    if (in->pending > 0 || in->head_off < in->head_len) want |= EPOLLOUT;
    set_mask(r, &c->ends[s], want);
  }
}

// Moves what it can in direction d within the turn's budget; returns -1 on error (c->err set).
static int pump(struct conn *c, int d) {
  struct dir *dir = &c->dirs[d];
  int src = c->ends[d].fd, dst = c->ends[1 - d].fd;
  while (c->budget[d] < TURN_BUDGET) {
    if (dir->head_off < dir->head_len) {
      ssize_t n = send(dst, dir->head + dir->head_off, dir->head_len - dir->head_off, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return 0;
        c->err = errno;
        return -1;
      }
      dir->head_off += (size_t)n;
      dir->bytes += (uint64_t)n;
      c->budget[d] += (size_t)n;
      continue;
    }
    if (dir->pending > 0) {
      ssize_t n = splice(dir->pipe[0], NULL, dst, NULL, dir->pending, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return 0;
        c->err = errno;
        return -1;
      }
      dir->pending -= (size_t)n;
      dir->bytes += (uint64_t)n;
      c->budget[d] += (size_t)n;
      continue;
    }
    if (dir->eof) {
      if (!dir->shut) {
        shutdown(dst, SHUT_WR);
        dir->shut = 1;
      }
      return 0;
    }
    ssize_t n = splice(src, NULL, dir->pipe[1], NULL, PIPE_SIZE, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return 0;
      c->err = errno;
      return -1;
    }
    if (n == 0) dir->eof = 1;
    dir->pending += (size_t)n;
  }
  return 0;
}

// Queues a report for JavaScript (it owns `rep` from here).
void relay_post(struct relay *r, struct report *rep) {
  if (napi_call_threadsafe_function(r->on_end, rep, napi_tsfn_blocking) != napi_ok) free(rep);
}

static void report(struct relay *r, struct conn *c) {
  struct report *e = calloc(1, sizeof *e);
  if (e == NULL) return;
  e->kind = REPORT_END;
  e->id = c->id;
  e->up = c->dirs[0].bytes;
  e->down = c->dirs[1].bytes;
  e->err = c->err;
  relay_post(r, e);
}

// A connection's pipes and ends for two connected sockets it takes over (closed by finish()).
struct conn *conn_new(int client_fd, int upstream_fd, int *err) {
  struct conn *c = calloc(1, sizeof *c);
  if (c == NULL) {
    *err = ENOMEM;
    return NULL;
  }
  for (int d = 0; d < 2; d++) c->dirs[d].pipe[0] = c->dirs[d].pipe[1] = -1;
  for (int d = 0; d < 2; d++) {
    if (pipe2(c->dirs[d].pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      *err = errno;
      conn_free(c);
      return NULL;
    }
    fcntl(c->dirs[d].pipe[1], F_SETPIPE_SZ, PIPE_SIZE);
  }
  c->ends[0].fd = client_fd;
  c->ends[1].fd = upstream_fd;
  for (int s = 0; s < 2; s++) {
    c->ends[s].kind = KIND_END;
    c->ends[s].conn = c;
    c->ends[s].side = s;
  }
  return c;
}

void conn_link_locked(struct relay *r, struct conn *c) {
  c->id = ++r->next_id;
  c->next = r->open;
  if (r->open != NULL) r->open->prev = c;
  r->open = c;
  r->count++;
}

void conn_free(struct conn *c) {
  for (int d = 0; d < 2; d++) {
    if (c->dirs[d].pipe[0] >= 0) close(c->dirs[d].pipe[0]);
    if (c->dirs[d].pipe[1] >= 0) close(c->dirs[d].pipe[1]);
    free(c->dirs[d].head);
  }
  free(c);
}

// Ends c: out of the open list (so close() no longer finds it), sockets closed, the end reported.
static void finish(struct relay *r, struct conn *c, struct conn **freed) {
  if (c->done) return;
  c->done = 1;
  pthread_mutex_lock(&r->mu);
  if (c->prev != NULL) c->prev->next = c->next;
  else r->open = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  r->count--;
  if (c->slot) r->slots--;
  close(c->ends[0].fd); // closing also removes them from the epoll set
  close(c->ends[1].fd);
  pthread_mutex_unlock(&r->mu);
  report(r, c);
  c->free_next = *freed;
  *freed = c;
}

static void handle(struct relay *r, struct end *e, uint32_t events, uint64_t turn, struct conn **freed) {
  struct conn *c = e->conn;
  if (c->done) return;
  if (c->turn != turn) {
    c->turn = turn;
    c->budget[0] = c->budget[1] = 0;
  }
  if (__atomic_load_n(&c->killed, __ATOMIC_ACQUIRE)) {
    finish(r, c, freed);
    return;
  }
  if (events & EPOLLERR) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    c->err = err != 0 ? err : ECONNRESET;
    finish(r, c, freed);
    return;
  }
  if (events & EPOLLHUP) e->hup = 1;
  if (pump(c, 0) < 0 || pump(c, 1) < 0) {
    finish(r, c, freed);
    return;
  }
  if (c->dirs[0].shut && c->dirs[1].shut) {
    finish(r, c, freed);
    return;
  }
  update_masks(r, c);
}

static void *run(void *arg) {
  struct relay *r = arg;
  struct epoll_event events[MAX_EVENTS];
  uint64_t turn = 0;
  for (;;) {
    int n = epoll_wait(r->epfd, events, MAX_EVENTS, fast_timeout_ms(r));
    if (n < 0) {
      if (errno == EINTR) continue;
      abort(); // EBADF/EINVAL: the relay's own descriptor is gone; no connection could move again
    }
    turn++;
    struct conn *freed = NULL;
    for (int i = 0; i < n; i++) {
      void *ptr = events[i].data.ptr;
      if (ptr != NULL && *(int *)ptr == KIND_END) {
        handle(r, ptr, events[i].events, turn, &freed);
        continue;
      }
      if (ptr != NULL) {
        fast_event(r, ptr, events[i].events); // fast.c: a listener, or an accepted connection
        continue;
      }
      uint64_t ignored;
      if (read(r->wake, &ignored, sizeof ignored) < 0) { /* EAGAIN: already drained */ }
      fast_on_wake(r);
      pthread_mutex_lock(&r->mu);
      struct conn *added = r->incoming;
      r->incoming = NULL;
      pthread_mutex_unlock(&r->mu);
      while (added != NULL) {
        struct conn *next = added->free_next;
        added->free_next = NULL;
        // add() already moved what was there: it may have failed or ended in that first pass.
        if (added->err != 0 || (added->dirs[0].shut && added->dirs[1].shut)) finish(r, added, &freed);
        else update_masks(r, added);
        added = next;
      }
    }
    fast_tick(r);
    while (freed != NULL) {
      struct conn *next = freed->free_next;
      conn_free(freed);
      freed = next;
    }
  }
  return NULL;
}

static void call_on_end(napi_env env, napi_value fn, void *context, void *data) {
  struct report *e = data;
  if (e->kind != REPORT_END) {
    fast_call_js(env, context, e);
    free(e);
    return;
  }
  if (env != NULL && fn != NULL) {
    napi_value argv[4], undefined;
    napi_get_undefined(env, &undefined);
    napi_create_uint32(env, e->id, &argv[0]);
    napi_create_double(env, (double)e->up, &argv[1]);
    napi_create_double(env, (double)e->down, &argv[2]);
    napi_create_int32(env, e->err, &argv[3]);
    napi_call_function(env, undefined, fn, 4, argv, NULL);
  }
  free(e);
}

static napi_value throw_errno(napi_env env, const char *what, int err) {
  char msg[160];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
  napi_throw_error(env, "ERR_RELAY", msg);
  return NULL;
}

static struct relay *relay_arg(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok || p == NULL) {
    napi_throw_type_error(env, "ERR_INVALID_ARG", "not a relay");
    return NULL;
  }
  return p;
}

static napi_value create(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], name, out;
  napi_valuetype t;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_typeof(env, argv[0], &t) != napi_ok || t != napi_function) {
    napi_throw_type_error(env, "ERR_INVALID_ARG", "create(onEnd)");
    return NULL;
  }
  struct relay *r = calloc(1, sizeof *r);
  if (r == NULL) return throw_errno(env, "relay", ENOMEM);
  r->epfd = epoll_create1(EPOLL_CLOEXEC);
  r->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  pthread_mutex_init(&r->mu, NULL);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  if (r->epfd < 0 || r->wake < 0 || epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->wake, &ev) != 0) {
    int err = errno;
    if (r->epfd >= 0) close(r->epfd);
    if (r->wake >= 0) close(r->wake);
    free(r);
    return throw_errno(env, "relay: epoll", err);
  }
  napi_create_string_utf8(env, "agentfense-relay", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[0], NULL, name, 0, 1, NULL, NULL, r, call_on_end,
                                      &r->on_end) != napi_ok) {
    close(r->epfd);
    close(r->wake);
    free(r);
    return NULL;
  }
  // The relay does not keep the process alive: the policy point's listeners and IPC channel do.
  napi_unref_threadsafe_function(env, r->on_end);
  int err = pthread_create(&r->thread, NULL, run, r);
  if (err != 0) {
    napi_release_threadsafe_function(r->on_end, napi_tsfn_abort);
    close(r->epfd);
    close(r->wake);
    free(r);
    return throw_errno(env, "relay: thread", err);
  }
  if (napi_create_external(env, r, NULL, NULL, &out) != napi_ok) return NULL;
  return out;
}

static int copy_head(napi_env env, napi_value v, struct dir *d) {
  napi_valuetype t;
  bool is_buffer = false;
  if (napi_typeof(env, v, &t) != napi_ok || t == napi_undefined || t == napi_null) return 0;
  if (napi_is_buffer(env, v, &is_buffer) != napi_ok || !is_buffer) return EINVAL;
  void *data;
  size_t len;
  if (napi_get_buffer_info(env, v, &data, &len) != napi_ok) return EINVAL;
  if (len == 0) return 0;
  d->head = malloc(len);
  if (d->head == NULL) return ENOMEM;
  memcpy(d->head, data, len);
  d->head_len = len;
  return 0;
}

static napi_value add(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5], out;
  int32_t fds[2] = {-1, -1};
  for (int i = 0; i < 5; i++) napi_get_undefined(env, &argv[i]);
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 ||
      napi_get_value_int32(env, argv[1], &fds[0]) != napi_ok ||
      napi_get_value_int32(env, argv[2], &fds[1]) != napi_ok || fds[0] < 0 || fds[1] < 0) {
    napi_throw_type_error(env, "ERR_INVALID_ARG", "add(relay, clientFd, upstreamFd, headUp?, headDown?)");
    return NULL;
  }
  struct relay *r = relay_arg(env, argv[0]);
  if (r == NULL) return NULL;
  // Our own descriptors: Node closes its copies once this returns.
  int own[2] = {-1, -1}, err = 0;
  for (int s = 0; s < 2 && err == 0; s++) {
    own[s] = fcntl(fds[s], F_DUPFD_CLOEXEC, 0);
    if (own[s] < 0) err = errno;
    else fcntl(own[s], F_SETFL, fcntl(own[s], F_GETFL) | O_NONBLOCK);
  }
  struct conn *c = err == 0 ? conn_new(own[0], own[1], &err) : NULL;
  if (c != NULL) err = copy_head(env, argv[3], &c->dirs[0]);
  if (c != NULL && err == 0) err = copy_head(env, argv[4], &c->dirs[1]);
  if (err != 0) {
    if (own[0] >= 0) close(own[0]);
    if (own[1] >= 0) close(own[1]);
    if (c != NULL) conn_free(c);
    return throw_errno(env, "relay: add", err);
  }
  // A first pass on this thread, before the relay's thread knows the connection: the bytes read while
  // deciding (and what already waits in the kernel) go out now, not after that thread's wake-up.
  if (pump(c, 0) == 0) pump(c, 1);
  pthread_mutex_lock(&r->mu);
  conn_link_locked(r, c);
  // The thread registers it (it alone changes epoll masks): handed over through the incoming list.
  c->free_next = r->incoming;
  r->incoming = c;
  uint32_t id = c->id;
  pthread_mutex_unlock(&r->mu);
  uint64_t one = 1;
  if (write(r->wake, &one, sizeof one) < 0) { /* EAGAIN: a wake-up is already pending */ }
  napi_create_uint32(env, id, &out);
  return out;
}

static napi_value close_conn(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], out;
  uint32_t id = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 ||
      napi_get_value_uint32(env, argv[1], &id) != napi_ok) {
    napi_throw_type_error(env, "ERR_INVALID_ARG", "close(relay, id)");
    return NULL;
  }
  struct relay *r = relay_arg(env, argv[0]);
  if (r == NULL) return NULL;
  int found = 0;
  pthread_mutex_lock(&r->mu);
  for (struct conn *c = r->open; c != NULL; c = c->next) {
    if (c->id != id) continue;
    // The thread wakes on the shut-down sockets and ends the connection; fds stay ours until then.
    __atomic_store_n(&c->killed, 1, __ATOMIC_RELEASE);
    shutdown(c->ends[0].fd, SHUT_RDWR);
    shutdown(c->ends[1].fd, SHUT_RDWR);
    found = 1;
    break;
  }
  pthread_mutex_unlock(&r->mu);
  napi_get_boolean(env, found, &out);
  return out;
}

static napi_value count(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) return NULL;
  struct relay *r = relay_arg(env, argv[0]);
  if (r == NULL) return NULL;
  pthread_mutex_lock(&r->mu);
  uint32_t n = r->count;
  pthread_mutex_unlock(&r->mu);
  napi_create_uint32(env, n, &out);
  return out;
}

NAPI_MODULE_INIT() {
  const struct {
    const char *name;
    napi_callback cb;
  } fns[] = {{"create", create}, {"add", add}, {"close", close_conn}, {"count", count}};
  if (fast_register(env, exports) != napi_ok) return NULL;
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value f;
    if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].cb, NULL, &f) != napi_ok ||
        napi_set_named_property(env, exports, fns[i].name, f) != napi_ok)
      return NULL;
  }
  return exports;
}
