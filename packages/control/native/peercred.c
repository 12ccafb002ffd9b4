// SO_PEERCRED for Node (which has no API for it): the run helper (src/cli/run-helper/) serves only
// clients of its own uid, and the uid of a Unix socket's peer is what the kernel recorded at connect(),
// not anything the client says. peerCredentials(fd) -> { pid, uid, gid }; and lockExclusive(fd) -> bool:
// flock(LOCK_EX|LOCK_NB), so one helper per data directory (the kernel drops the lock when it dies).
#define _GNU_SOURCE
#include <errno.h>
#include <node_api.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>

static napi_value set_number(napi_env env, napi_value obj, const char *name, double value) {
  napi_value v;
  if (napi_create_double(env, value, &v) != napi_ok) return NULL;
  if (napi_set_named_property(env, obj, name, v) != napi_ok) return NULL;
  return obj;
}

/* The one argument, a descriptor: -1 with a TypeError thrown (`usage`) when it is not one. */
static int32_t fd_argument(napi_env env, napi_callback_info info, const char *usage) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
    napi_throw_type_error(env, "ERR_INVALID_ARG", usage);
    return -1;
  }
  return fd;
}

static napi_value peer_credentials(napi_env env, napi_callback_info info) {
  int32_t fd = fd_argument(env, info, "peerCredentials(fd): fd must be a socket descriptor");
  if (fd < 0) return NULL;
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred) {
    napi_throw_error(env, "ERR_PEERCRED", strerror(errno));
    return NULL;
  }
  napi_value obj;
  if (napi_create_object(env, &obj) != napi_ok) return NULL;
  if (set_number(env, obj, "pid", cred.pid) == NULL || set_number(env, obj, "uid", cred.uid) == NULL ||
      set_number(env, obj, "gid", cred.gid) == NULL)
    return NULL;
  return obj;
}

static napi_value lock_exclusive(napi_env env, napi_callback_info info) {
  int32_t fd = fd_argument(env, info, "lockExclusive(fd): fd must be an open file descriptor");
  if (fd < 0) return NULL;
  int rc;
  do rc = flock(fd, LOCK_EX | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EWOULDBLOCK) {
    napi_throw_error(env, "ERR_FLOCK", strerror(errno));
    return NULL;
  }
  napi_value result;
  if (napi_get_boolean(env, rc == 0, &result) != napi_ok) return NULL;
  return result;
}

NAPI_MODULE_INIT() {
  napi_property_descriptor functions[] = {
      {"lockExclusive", NULL, lock_exclusive, NULL, NULL, NULL, napi_enumerable, NULL},
      {"peerCredentials", NULL, peer_credentials, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  if (napi_define_properties(env, exports, 2, functions) != napi_ok) return NULL;
  return exports;
}
