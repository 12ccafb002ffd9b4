// What Node cannot do by itself for the policy point (src/native.ts): open a socket inside a sandbox's
// network namespace while the process stays in the host's, and read where a redirected connection was
// going. openInNetns(nsFd, family 4|6, 'tcp'|'udp', address, port) -> a bound (and, for TCP, listening)
// non-blocking descriptor that Node then adopts; originalDestination(fd) -> { address, port }.
// setns(CLONE_NEWNET) applies to the calling thread only, and this one returns to its own namespace
// before anything else runs on it (or aborts: a JS thread left in the sandbox's namespace would dial
// out from there).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <netinet/in.h>
#include <node_api.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static napi_value fail(napi_env env, const char *what, int err) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
  napi_throw_error(env, "ERR_NETNS", msg);
  return NULL;
}

static int bind_address(int fd, int af, const char *text, int port) {
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t len;
  if (af == AF_INET) {
    struct sockaddr_in *s = (struct sockaddr_in *)&ss;
    s->sin_family = AF_INET;
    s->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, text, &s->sin_addr) != 1) return EINVAL;
    len = sizeof *s;
  } else {
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
    s->sin6_family = AF_INET6;
    s->sin6_port = htons((uint16_t)port);
    if (inet_pton(AF_INET6, text, &s->sin6_addr) != 1) return EINVAL;
    len = sizeof *s;
  }
  return bind(fd, (struct sockaddr *)&ss, len) == 0 ? 0 : errno;
}

static napi_value open_in_netns(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  int32_t nsfd = -1, family = 0, port = 0;
  char type[8] = "", address[64] = "";
  size_t n;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 5 ||
      napi_get_value_int32(env, argv[0], &nsfd) != napi_ok ||
      napi_get_value_int32(env, argv[1], &family) != napi_ok ||
      napi_get_value_string_utf8(env, argv[2], type, sizeof type, &n) != napi_ok ||
      napi_get_value_string_utf8(env, argv[3], address, sizeof address, &n) != napi_ok ||
      napi_get_value_int32(env, argv[4], &port) != napi_ok || (family != 4 && family != 6) ||
      port < 1 || port > 65535) {
    napi_throw_type_error(env, "ERR_INVALID_ARG",
                          "openInNetns(nsFd, 4|6, 'tcp'|'udp', address, port)");
    return NULL;
  }
  int udp = strcmp(type, "udp") == 0;
  int af = family == 6 ? AF_INET6 : AF_INET;
  int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (self < 0) return fail(env, "open /proc/thread-self/ns/net", errno);
  if (setns(nsfd, CLONE_NEWNET) != 0) {
    int err = errno;
    close(self);
    return fail(env, "setns into the sandbox's network namespace", err);
  }
  int fd = socket(af, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int err = fd < 0 ? errno : 0;
  if (setns(self, CLONE_NEWNET) != 0) abort();
  close(self);
  if (fd < 0) return fail(env, "socket", err);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (af == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  err = bind_address(fd, af, address, port);
  if (err == 0 && !udp && listen(fd, 1024) != 0) err = errno;
  if (err != 0) {
    close(fd);
    return fail(env, "bind/listen in the sandbox's network namespace", err);
  }
  napi_value out;
  if (napi_create_int32(env, fd, &out) != napi_ok) return NULL;
  return out;
}

static napi_value original_destination(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd = -1;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
    napi_throw_type_error(env, "ERR_INVALID_ARG", "originalDestination(fd)");
    return NULL;
  }
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  char text[INET6_ADDRSTRLEN] = "";
  int port;
  if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &len) == 0) {
    struct sockaddr_in *s = (struct sockaddr_in *)&ss;
    inet_ntop(AF_INET, &s->sin_addr, text, sizeof text);
    port = ntohs(s->sin_port);
  } else {
    len = sizeof ss;
    if (getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &ss, &len) != 0)
      return fail(env, "SO_ORIGINAL_DST", errno);
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
    inet_ntop(AF_INET6, &s->sin6_addr, text, sizeof text);
    port = ntohs(s->sin6_port);
  }
  napi_value obj, a, p;
  if (napi_create_object(env, &obj) != napi_ok ||
      napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &a) != napi_ok ||
      napi_create_int32(env, port, &p) != napi_ok ||
      napi_set_named_property(env, obj, "address", a) != napi_ok ||
      napi_set_named_property(env, obj, "port", p) != napi_ok)
    return NULL;
  return obj;
}

// notDumpable(): PR_SET_DUMPABLE 0 for the whole process. The policy point holds a sandbox's secret
// values: no core dump, and /proc/<pid>/{environ,mem,maps} become root's and ptrace needs CAP_SYS_PTRACE.
static napi_value not_dumpable(napi_env env, napi_callback_info info) {
  (void)info;
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return fail(env, "prctl(PR_SET_DUMPABLE)", errno);
  napi_value out;
  napi_get_undefined(env, &out);
  return out;
}

// isDumpable(): PR_GET_DUMPABLE, for the tests of the above.
static napi_value is_dumpable(napi_env env, napi_callback_info info) {
  (void)info;
  int r = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  if (r < 0) return fail(env, "prctl(PR_GET_DUMPABLE)", errno);
  napi_value out;
  napi_get_boolean(env, r != 0, &out);
  return out;
}

NAPI_MODULE_INIT() {
  napi_value f;
  if (napi_create_function(env, "openInNetns", NAPI_AUTO_LENGTH, open_in_netns, NULL, &f) !=
          napi_ok ||
      napi_set_named_property(env, exports, "openInNetns", f) != napi_ok)
    return NULL;
  if (napi_create_function(env, "originalDestination", NAPI_AUTO_LENGTH, original_destination,
                           NULL, &f) != napi_ok ||
      napi_set_named_property(env, exports, "originalDestination", f) != napi_ok)
    return NULL;
  if (napi_create_function(env, "notDumpable", NAPI_AUTO_LENGTH, not_dumpable, NULL, &f) != napi_ok ||
      napi_set_named_property(env, exports, "notDumpable", f) != napi_ok)
    return NULL;
  if (napi_create_function(env, "isDumpable", NAPI_AUTO_LENGTH, is_dumpable, NULL, &f) != napi_ok ||
      napi_set_named_property(env, exports, "isDumpable", f) != napi_ok)
    return NULL;
  return exports;
}
