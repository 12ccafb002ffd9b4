// The C accept path's JavaScript side (fast.c is the thread's): its reports delivered to the onFast
// callback in order, and the calls JavaScript makes (src/relay.ts):
//   fastStart(relay, onFast, maxConnections)   onFast('handed', fd, over) | ('started', id, name,
//                                              address, port, started, errno, via) | ('failed', ...
//                                              the same) | ('tunnel', fd, upstreamFd, name, address,
//                                              port, started) | ('http', the same, method, via)
//                                              (via: 'transparent' | 'proxy')
//   fastListen(relay, fd)  fastRemember(relay, name, address, port, ttlMs, kind?)  fastClear(relay)
//                                              (kind: 0 transparent TLS, 1 CONNECT, 2 explicit-proxy
//                                              plain HTTP, 3 transparent plain HTTP)
//   fastAcquire(relay) -> bool  fastRelease(relay)  fastStop(relay)
#include "fast.h"
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

void fast_call_js(napi_env env, struct relay *r, struct report *e) {
  napi_value fn, undefined, argv[9];
  if (env == NULL || r->on_fast == NULL || napi_get_reference_value(env, r->on_fast, &fn) != napi_ok) {
    if (e->kind == REPORT_HANDED || e->kind == REPORT_TUNNEL || e->kind == REPORT_HTTP) close(e->fd);
    if (e->kind == REPORT_TUNNEL || e->kind == REPORT_HTTP) close(e->upstream);
    return;
  }
  napi_get_undefined(env, &undefined);
  size_t argc;
  if (e->kind == REPORT_HANDED) {
    napi_create_string_utf8(env, "handed", NAPI_AUTO_LENGTH, &argv[0]);
    napi_create_int32(env, e->fd, &argv[1]);
    napi_get_boolean(env, e->over, &argv[2]);
    argc = 3;
  } else if (e->kind == REPORT_TUNNEL || e->kind == REPORT_HTTP) {
    int http = e->kind == REPORT_HTTP;
    napi_create_string_utf8(env, http ? "http" : "tunnel", NAPI_AUTO_LENGTH, &argv[0]);
    napi_create_int32(env, e->fd, &argv[1]);
    napi_create_int32(env, e->upstream, &argv[2]);
    napi_create_string_utf8(env, e->name, NAPI_AUTO_LENGTH, &argv[3]);
    napi_create_string_utf8(env, e->address, NAPI_AUTO_LENGTH, &argv[4]);
    napi_create_int32(env, e->port, &argv[5]);
    napi_create_double(env, e->started, &argv[6]);
    napi_create_string_utf8(env, e->method, NAPI_AUTO_LENGTH, &argv[7]);
    napi_create_string_utf8(env, e->via == VIA_PROXY ? "proxy" : "transparent", NAPI_AUTO_LENGTH, &argv[8]);
    argc = http ? 9 : 7;
  } else {
    int started = e->kind == REPORT_STARTED;
    napi_create_string_utf8(env, started ? "started" : "failed", NAPI_AUTO_LENGTH, &argv[0]);
    napi_create_uint32(env, e->id, &argv[1]);
    napi_create_string_utf8(env, e->name, NAPI_AUTO_LENGTH, &argv[2]);
    napi_create_string_utf8(env, e->address, NAPI_AUTO_LENGTH, &argv[3]);
    napi_create_int32(env, e->port, &argv[4]);
    napi_create_double(env, e->started, &argv[5]);
    napi_create_int32(env, e->err, &argv[6]);
    napi_create_string_utf8(env, e->via == VIA_PROXY ? "proxy" : "transparent", NAPI_AUTO_LENGTH, &argv[7]);
    argc = 8;
  }
  napi_call_function(env, undefined, fn, argc, argv, NULL);
}

// ---- JavaScript's side ----

static struct relay *fast_arg(napi_env env, napi_callback_info info, size_t *argc, napi_value *argv) {
  void *p = NULL;
  if (napi_get_cb_info(env, info, argc, argv, NULL, NULL) != napi_ok || *argc < 1 ||
      napi_get_value_external(env, argv[0], &p) != napi_ok || p == NULL) {
    napi_throw_type_error(env, "ERR_INVALID_ARG", "not a relay");
    return NULL;
  }
  return p;
}

static napi_value js_start(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  uint32_t max = 0;
  struct relay *r = fast_arg(env, info, &argc, argv);
  if (r == NULL) return NULL;
  if (argc < 3 || napi_get_value_uint32(env, argv[2], &max) != napi_ok || r->fast != NULL) {
    napi_throw_type_error(env, "ERR_INVALID_ARG", "fastStart(relay, onFast, maxConnections), once");
    return NULL;
  }
  struct fast *f = calloc(1, sizeof *f);
  if (f == NULL || napi_create_reference(env, argv[1], 1, &r->on_fast) != napi_ok) {
    free(f);
    napi_throw_error(env, "ERR_RELAY", "fastStart: out of memory");
    return NULL;
  }
  pthread_mutex_lock(&r->mu);
  r->max_slots = max;
  __atomic_store_n(&r->fast, f, __ATOMIC_RELEASE); // the thread reads it without the lock
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

static napi_value js_listen(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t fd = -1;
  struct relay *r = fast_arg(env, info, &argc, argv);
  if (r == NULL) return NULL;
  struct listener *l = calloc(1, sizeof *l);
  if (argc < 2 || napi_get_value_int32(env, argv[1], &fd) != napi_ok || fd < 0 || r->fast == NULL ||
      l == NULL) {
    free(l);
    napi_throw_type_error(env, "ERR_INVALID_ARG", "fastListen(relay, fd) after fastStart");
    return NULL;
  }
  l->kind = KIND_LISTENER;
  l->fd = fd; // ours from here on
  pthread_mutex_lock(&r->mu);
  l->next = r->fast->listeners;
  r->fast->listeners = l;
  pthread_mutex_unlock(&r->mu);
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
  epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev);
  return NULL;
}

static napi_value js_remember(napi_env env, napi_callback_info info) {
  size_t argc = 6, name_len = 0, address_len = 0;
  napi_value argv[6];
  char name[256], address[INET6_ADDRSTRLEN];
  int32_t port = 0;
  double ttl = 0;
  int32_t kind = ENTRY_TRANSPARENT;
  struct relay *r = fast_arg(env, info, &argc, argv);
  if (r == NULL) return NULL;
  if (argc >= 6) napi_get_value_int32(env, argv[5], &kind);
  if (argc < 5 || r->fast == NULL ||
      napi_get_value_string_utf8(env, argv[1], name, sizeof name, &name_len) != napi_ok ||
      napi_get_value_string_utf8(env, argv[2], address, sizeof address, &address_len) != napi_ok ||
      napi_get_value_int32(env, argv[3], &port) != napi_ok || napi_get_value_double(env, argv[4], &ttl) != napi_ok ||
      name_len == 0 || name_len > 253 || address_len == 0 || address_len >= sizeof address - 1 ||
      kind < ENTRY_TRANSPARENT || kind > ENTRY_TRANSPARENT_HTTP) {
    napi_throw_type_error(env, "ERR_INVALID_ARG", "fastRemember(relay, name, address, port, ttlMs, kind?)");
    return NULL;
  }
  pthread_mutex_lock(&r->mu);
  table_put(&r->fast->table, name, address, port, (int64_t)ttl, kind);
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

// Every entry goes, and a connection decided by one of them that is not relayed yet goes to Node:
// when this returns, nothing the old rules allowed starts through this path.
static napi_value js_clear(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  struct relay *r = fast_arg(env, info, &argc, argv);
  if (r == NULL || r->fast == NULL) return NULL;
  pthread_mutex_lock(&r->mu);
  table_clear(&r->fast->table);
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

static napi_value js_acquire(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out;
  struct relay *r = fast_arg(env, info, &argc, argv);
  if (r == NULL) return NULL;
  pthread_mutex_lock(&r->mu);
  int ok = r->slots < r->max_slots;
  if (ok) r->slots++;
  pthread_mutex_unlock(&r->mu);
  napi_get_boolean(env, ok, &out);
  return out;
}

static napi_value js_release(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  struct relay *r = fast_arg(env, info, &argc, argv);
  if (r == NULL) return NULL;
  pthread_mutex_lock(&r->mu);
  if (r->slots > 0) r->slots--;
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

static napi_value js_stop(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  struct relay *r = fast_arg(env, info, &argc, argv);
  if (r == NULL || r->fast == NULL) return NULL;
  pthread_mutex_lock(&r->mu);
  r->fast->stopping = 1;
  table_clear(&r->fast->table);
  pthread_mutex_unlock(&r->mu);
  uint64_t one = 1;
  if (write(r->wake, &one, sizeof one) < 0) { /* EAGAIN: a wake-up is already pending */ }
  return NULL;
}

napi_status fast_register(napi_env env, napi_value exports) {
  const struct {
    const char *name;
    napi_callback cb;
  } fns[] = {{"fastStart", js_start},   {"fastListen", js_listen},   {"fastRemember", js_remember},
             {"fastClear", js_clear},   {"fastAcquire", js_acquire}, {"fastRelease", js_release},
             {"fastStop", js_stop}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value f;
    napi_status s = napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].cb, NULL, &f);
    if (s == napi_ok) s = napi_set_named_property(env, exports, fns[i].name, f);
    if (s != napi_ok) return s;
  }
  return napi_ok;
}
