/*
 * Host syscalls Node does not offer exactly, for the FUSE worker.
 *
 * Why: Node's positional I/O takes a position that is not a safe integer as "the current position"
 * (a write at 2^53 would land at the file's end or start), fs.ftruncate refuses lengths above 2^53, Node
 * has no fallocate, no mknod, no xattrs, and fs.utimes takes fractional seconds (a double cannot hold
 * nanoseconds of a current date). These wrappers take exact 64-bit values (a BigInt, or a Number that is
 * a safe integer) and full timespecs, run synchronously on the calling thread, and throw an Error whose
 * `code` is the errno name (like Node's), with `errno` and `syscall` set by src/host-io.ts.
 */
#define _GNU_SOURCE

#include <node_api.h>

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

#define MAX_SAFE 9007199254740991.0

static const char *errno_code(int e) {
  switch (e) {
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case EIO: return "EIO";
    case EBADF: return "EBADF";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EEXIST: return "EEXIST";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EINVAL: return "EINVAL";
    case EFBIG: return "EFBIG";
    case ENOSPC: return "ENOSPC";
    case ESPIPE: return "ESPIPE";
    case EROFS: return "EROFS";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ENOSYS: return "ENOSYS";
    case ELOOP: return "ELOOP";
    case ENODATA: return "ENODATA";
    case EOVERFLOW: return "EOVERFLOW";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EDQUOT: return "EDQUOT";
    case ERANGE: return "ERANGE";
    case E2BIG: return "E2BIG";
    case ETXTBSY: return "ETXTBSY";
    case EINTR: return "EINTR";
    default: return "EIO";
  }
}

/* Throws Error(code, message) and returns NULL; src/host-io.ts adds errno/syscall from the code. */
static napi_value throw_errno(napi_env env, int e, const char *syscall) {
  char msg[160];
  snprintf(msg, sizeof(msg), "%s: %s (%d)", syscall, strerror(e), e);
  napi_throw_error(env, errno_code(e), msg);
  return NULL;
}

/* An exact signed 64-bit value from a BigInt, or from a Number that is a safe integer. */
static int get_i64(napi_env env, napi_value v, int64_t *out, const char *what) {
  napi_valuetype t;
  napi_typeof(env, v, &t);
  if (t == napi_bigint) {
    bool lossless = false;
    if (napi_get_value_bigint_int64(env, v, out, &lossless) == napi_ok && lossless) return 1;
  } else if (t == napi_number) {
    double d;
    napi_get_value_double(env, v, &d);
    if (d == floor(d) && fabs(d) <= MAX_SAFE) { *out = (int64_t) d; return 1; }
  }
  char msg[128];
  snprintf(msg, sizeof(msg), "%s must be a BigInt or a safe integer within 64 bits", what);
  napi_throw_range_error(env, "ERR_OUT_OF_RANGE", msg);
  return 0;
}

static int get_i32(napi_env env, napi_value v, int32_t *out, const char *what) {
  if (napi_get_value_int32(env, v, out) == napi_ok) return 1;
  char msg[96];
  snprintf(msg, sizeof(msg), "%s must be a number", what);
  napi_throw_type_error(env, NULL, msg);
  return 0;
}

/* A path argument copied into buf (NUL-terminated); host paths are below PATH_MAX. */
static int get_path(napi_env env, napi_value v, char *buf, size_t cap) {
  size_t len;
  if (napi_get_value_string_utf8(env, v, buf, cap, &len) != napi_ok || len >= cap - 1 || len == 0) {
    napi_throw_type_error(env, NULL, "path must be a non-empty string shorter than 4096 bytes");
    return 0;
  }
  return 1;
}

static int get_bytes(napi_env env, napi_value v, void **p, size_t *len) {
  napi_typedarray_type tt;
  napi_value ab;
  size_t off;
  if (napi_get_typedarray_info(env, v, &tt, len, p, &ab, &off) != napi_ok || tt != napi_uint8_array) {
    napi_throw_type_error(env, NULL, "data must be a Buffer or Uint8Array");
    return 0;
  }
  return 1;
}

static napi_value num(napi_env env, double d) {
  napi_value r;
  napi_create_double(env, d, &r);
  return r;
}

#define ARGS(N) \
  size_t argc = N; napi_value argv[N]; \
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL; \
  if (argc < N) { napi_throw_type_error(env, NULL, "missing arguments"); return NULL; }

/* pwrite(fd, data, position) -> bytes written */
static napi_value hio_pwrite(napi_env env, napi_callback_info info) {
  ARGS(3)
  int32_t fd; void *p; size_t len; int64_t pos;
  if (!get_i32(env, argv[0], &fd, "fd") || !get_bytes(env, argv[1], &p, &len) || !get_i64(env, argv[2], &pos, "position")) return NULL;
  if (pos < 0) return throw_errno(env, EINVAL, "pwrite");
  ssize_t n;
  do { n = pwrite(fd, p, len, (off_t) pos); } while (n < 0 && errno == EINTR);
  if (n < 0) return throw_errno(env, errno, "pwrite");
  return num(env, (double) n);
}

/* pread(fd, buffer, position) -> bytes read */
static napi_value hio_pread(napi_env env, napi_callback_info info) {
  ARGS(3)
  int32_t fd; void *p; size_t len; int64_t pos;
  if (!get_i32(env, argv[0], &fd, "fd") || !get_bytes(env, argv[1], &p, &len) || !get_i64(env, argv[2], &pos, "position")) return NULL;
  if (pos < 0) return throw_errno(env, EINVAL, "pread");
  ssize_t n;
  do { n = pread(fd, p, len, (off_t) pos); } while (n < 0 && errno == EINTR);
  if (n < 0) return throw_errno(env, errno, "pread");
  return num(env, (double) n);
}

/* ftruncate(fd, length) */
static napi_value hio_ftruncate(napi_env env, napi_callback_info info) {
  ARGS(2)
  int32_t fd; int64_t len;
  if (!get_i32(env, argv[0], &fd, "fd") || !get_i64(env, argv[1], &len, "length")) return NULL;
  int r;
  do { r = ftruncate(fd, (off_t) len); } while (r < 0 && errno == EINTR);
  if (r < 0) return throw_errno(env, errno, "ftruncate");
  return NULL;
}

/* fallocate(fd, mode, offset, length): mode as fallocate(2) (FALLOC_FL_*) */
static napi_value hio_fallocate(napi_env env, napi_callback_info info) {
  ARGS(4)
  int32_t fd, mode; int64_t off, len;
  if (!get_i32(env, argv[0], &fd, "fd") || !get_i32(env, argv[1], &mode, "mode") ||
      !get_i64(env, argv[2], &off, "offset") || !get_i64(env, argv[3], &len, "length")) return NULL;
  int r;
  do { r = fallocate(fd, mode, (off_t) off, (off_t) len); } while (r < 0 && errno == EINTR);
  if (r < 0) return throw_errno(env, errno, "fallocate");
  return NULL;
}

/* A timespec from (sec, nsec); nsec may be UTIME_NOW or UTIME_OMIT. */
static int get_ts(napi_env env, napi_value sec, napi_value nsec, struct timespec *ts) {
  int64_t s, n;
  if (!get_i64(env, sec, &s, "seconds") || !get_i64(env, nsec, &n, "nanoseconds")) return 0;
  if (n != UTIME_NOW && n != UTIME_OMIT && (n < 0 || n > 999999999)) {
    napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "nanoseconds must be 0..999999999, UTIME_NOW or UTIME_OMIT");
    return 0;
  }
  ts->tv_sec = (time_t) s;
  ts->tv_nsec = (long) n;
  return 1;
}

/* utimensat(path, atimeSec, atimeNsec, mtimeSec, mtimeNsec): never follows a final symlink */
static napi_value hio_lutimens(napi_env env, napi_callback_info info) {
  ARGS(5)
  char path[4096]; struct timespec ts[2];
  if (!get_path(env, argv[0], path, sizeof(path)) || !get_ts(env, argv[1], argv[2], &ts[0]) ||
      !get_ts(env, argv[3], argv[4], &ts[1])) return NULL;
  if (utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) < 0) return throw_errno(env, errno, "utimensat");
  return NULL;
}

/* futimens(fd, atimeSec, atimeNsec, mtimeSec, mtimeNsec) */
static napi_value hio_futimens(napi_env env, napi_callback_info info) {
  ARGS(5)
  int32_t fd; struct timespec ts[2];
  if (!get_i32(env, argv[0], &fd, "fd") || !get_ts(env, argv[1], argv[2], &ts[0]) ||
      !get_ts(env, argv[3], argv[4], &ts[1])) return NULL;
  if (futimens(fd, ts) < 0) return throw_errno(env, errno, "futimens");
  return NULL;
}

/* mallocTrim() -> boolean: glibc's malloc_trim(0), which gives the free pages of the heap back to the
 * kernel, also those below its top (freeing alone returns only the top, so one small allocation left
 * above a freed burst keeps all of it resident). For a process that goes idle after a burst. */
static napi_value hio_malloc_trim(napi_env env, napi_callback_info info) {
  (void) info; /* no arguments */
  napi_value r;
  napi_get_boolean(env, malloc_trim(0) == 1, &r);
  return r;
}

/* mknod(path, mode, rdev): mode includes the file type bits */
static napi_value hio_mknod(napi_env env, napi_callback_info info) {
  ARGS(3)
  char path[4096]; int32_t mode; int64_t rdev;
  if (!get_path(env, argv[0], path, sizeof(path)) || !get_i32(env, argv[1], &mode, "mode") ||
      !get_i64(env, argv[2], &rdev, "rdev")) return NULL;
  if (mknod(path, (mode_t) mode, (dev_t) rdev) < 0) return throw_errno(env, errno, "mknod");
  return NULL;
}

/* lgetxattr(path, name) -> Buffer, or null when the attribute is absent (ENODATA) */
static napi_value hio_lgetxattr(napi_env env, napi_callback_info info) {
  ARGS(2)
  char path[4096], name[256];
  size_t nlen;
  if (!get_path(env, argv[0], path, sizeof(path))) return NULL;
  if (napi_get_value_string_utf8(env, argv[1], name, sizeof(name), &nlen) != napi_ok || nlen == 0 || nlen >= sizeof(name) - 1) {
    napi_throw_type_error(env, NULL, "bad xattr name");
    return NULL;
  }
  char val[256];
  ssize_t n = lgetxattr(path, name, val, sizeof(val));
  napi_value r;
  if (n < 0) {
    if (errno == ENODATA || errno == ENOTSUP) { napi_get_null(env, &r); return r; }
    return throw_errno(env, errno, "lgetxattr");
  }
  napi_create_buffer_copy(env, (size_t) n, val, NULL, &r);
  return r;
}

/* lsetxattr(path, name, value) */
static napi_value hio_lsetxattr(napi_env env, napi_callback_info info) {
  ARGS(3)
  char path[4096], name[256];
  size_t nlen, len;
  void *p;
  if (!get_path(env, argv[0], path, sizeof(path))) return NULL;
  if (napi_get_value_string_utf8(env, argv[1], name, sizeof(name), &nlen) != napi_ok || nlen == 0 || nlen >= sizeof(name) - 1) {
    napi_throw_type_error(env, NULL, "bad xattr name");
    return NULL;
  }
  if (!get_bytes(env, argv[2], &p, &len)) return NULL;
  if (lsetxattr(path, name, p, len, 0) < 0) return throw_errno(env, errno, "lsetxattr");
  return NULL;
}

static void export_fn(napi_env env, napi_value obj, const char *name, napi_callback cb) {
  napi_value fn;
  napi_create_function(env, name, NAPI_AUTO_LENGTH, cb, NULL, &fn);
  napi_set_named_property(env, obj, name, fn);
}

/* Registered by fuse_lowlevel_register as exports.host_io. */
void fuse_hostio_register(napi_env env, napi_value exports) {
  napi_value o;
  napi_create_object(env, &o);
  export_fn(env, o, "pwrite", hio_pwrite);
  export_fn(env, o, "pread", hio_pread);
  export_fn(env, o, "ftruncate", hio_ftruncate);
  export_fn(env, o, "fallocate", hio_fallocate);
  export_fn(env, o, "lutimens", hio_lutimens);
  export_fn(env, o, "futimens", hio_futimens);
  export_fn(env, o, "mknod", hio_mknod);
  export_fn(env, o, "mallocTrim", hio_malloc_trim);
  export_fn(env, o, "lgetxattr", hio_lgetxattr);
  export_fn(env, o, "lsetxattr", hio_lsetxattr);
  napi_value v;
  napi_create_int64(env, UTIME_NOW, &v);
  napi_set_named_property(env, o, "UTIME_NOW", v);
  napi_create_int64(env, UTIME_OMIT, &v);
  napi_set_named_property(env, o, "UTIME_OMIT", v);
  napi_set_named_property(env, exports, "host_io", o);
}
