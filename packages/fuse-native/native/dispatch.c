/* Dispatch: a queued record becomes one call of the JS dispatcher (the request handle, the caller's
 * credentials and the op's arguments as JS values); events settle their promises. JS thread only. */
#include "ll.h"
#include "fast-create.h"
#include "fast-rename.h"

static void payload_unref(ll_payload *p) {
  if (--p->refs > 0) return;
  if (!p->recycled) free(p->base);
  free(p);
}

static void req_finalize(napi_env env, void *data, void *hint) {
  (void) env; (void) hint; /* a napi_finalize: only the record matters */
  ll_msg *m = data;
  ll_session *s = m->s;
  if (m->payload) payload_unref(m->payload);
  /* A request JS dropped without answering would hang the caller's syscall forever: fail it. */
  if (!m->replied) frename_after_reply(m); /* what a RENAME ends, it ends whether answered or not */
  if (!m->replied && session_live(s)) fuse_reply_err(m->req, EIO);
  free(m);
  session_unref(s);
}

/* hint: the allocation data points into (a handed-over receive buffer), or NULL */
static void free_data(napi_env env, void *data, void *hint) {
  (void) env;
  free(hint ? hint : data);
}

/* The finalizer of a handed-over WRITE payload's Buffer (also after a detach). */
static void free_payload(napi_env env, void *data, void *hint) {
  (void) env; (void) data; /* the payload lies in p->base */
  ll_payload *p = hint;
  if (!p->recycled) { free(p->base); p->base = NULL; }
  payload_unref(p);
}

static void free_msg_data(ll_msg *m) {
  free(m->data_base ? m->data_base : m->data);
  m->data = m->data_base = NULL;
}

static napi_value mkdouble(napi_env env, double v) {
  napi_value r;
  napi_create_double(env, v, &r);
  return r;
}

napi_value mkuint(napi_env env, uint32_t v) {
  napi_value r;
  napi_create_uint32(env, v, &r);
  return r;
}

static napi_value mkname(napi_env env, const char *p, size_t len) {
  napi_value r;
  napi_create_buffer_copy(env, len, p, NULL, &r);
  return r;
}

static napi_value mkstr(napi_env env, const char *p, size_t len) {
  napi_value r;
  napi_create_string_utf8(env, p, len, &r);
  return r;
}

/* An offset or size exactly: a Number up to 2^53 - 1 (the common case, cheap), a BigInt above. A double
 * would round 2^53 + 1 to 2^53, and Node's positional I/O treats a non-safe-integer position as "the
 * current position", so a rounded offset must never reach JS. */
static napi_value mkoff(napi_env env, uint64_t v) {
  napi_value r;
  if (v <= 9007199254740991ULL) napi_create_double(env, (double) v, &r);
  else napi_create_bigint_uint64(env, v, &r);
  return r;
}

static napi_value mkfh(napi_env env, ll_msg *m) {
  napi_value r;
  if (m->has_fh) napi_create_double(env, (double) m->fh, &r);
  else napi_get_undefined(env, &r);
  return r;
}

static napi_value mkdata(napi_env env, ll_msg *m) {
  napi_value r;
  /* External buffer: no second copy; the JS Buffer owns the malloc'ed bytes from here on. */
  ll_payload *p = m->data_base ? malloc(sizeof(ll_payload)) : NULL;
  if (p) {
    p->base = m->data_base; p->recycled = 0; p->refs = 2;
    if (napi_create_external_buffer(env, m->datalen, m->data, free_payload, p, &r) == napi_ok) {
      m->payload = p;
      m->data = m->data_base = NULL;
      return r;
    }
    free(p);
  }
  if (napi_create_external_buffer(env, m->datalen, m->data, free_data, m->data_base, &r) != napi_ok) {
    napi_create_buffer_copy(env, m->datalen, m->data, NULL, &r);
    free_msg_data(m);
  }
  m->data = m->data_base = NULL;
  return r;
}

void dispatch_one(ll_session *s, napi_env env, napi_value dispatch, napi_value global, ll_msg *m) {
  napi_value argv[16]; /* setattr: 5 common + 11 */
  size_t argc = 5;
  int keep = 0; /* whether m becomes a JS-owned request handle */
  napi_value u;
  napi_get_undefined(env, &u);
  argv[0] = mkuint(env, (uint32_t) m->kind);
  argv[1] = u;
  argv[2] = mkuint(env, m->uid);
  argv[3] = mkuint(env, m->gid);
  argv[4] = mkuint(env, m->pid);

  if (m->req) {
    if (napi_create_external(env, m, req_finalize, NULL, &argv[1]) != napi_ok) {
      fuse_reply_err(m->req, EIO);
      free_msg_data(m);
      free(m);
      return;
    }
    s->refs++;
    keep = 1;
  }

  switch (m->kind) {
    case OP_LOOKUP: case OP_UNLINK: case OP_RMDIR:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkname(env, m->name, m->namelen);
      break;
    case OP_FORGET:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkdouble(env, (double) m->off);
      break;
    case OP_FORGET_MULTI: {
      napi_value ab, ta;
      void *p;
      napi_create_arraybuffer(env, m->datalen, &p, &ab);
      memcpy(p, m->data, m->datalen);
      napi_create_typedarray(env, napi_float64_array, m->datalen / sizeof(double), ab, 0, &ta);
      argv[argc++] = ta;
      break;
    }
    case OP_GETATTR: case OP_READLINK: case OP_STATFS:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkfh(env, m);
      break;
    case OP_SETATTR:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkuint(env, m->flags);
      argv[argc++] = mkuint(env, m->mode);
      argv[argc++] = mkuint(env, m->sa_uid);
      argv[argc++] = mkuint(env, m->sa_gid);
      argv[argc++] = mkoff(env, m->size);
      /* seconds are exact as doubles up to 2^53; nanoseconds 0..999999999 */
      argv[argc++] = mkdouble(env, (double) m->sa_atime.tv_sec);
      argv[argc++] = mkdouble(env, (double) m->sa_atime.tv_nsec);
      argv[argc++] = mkdouble(env, (double) m->sa_mtime.tv_sec);
      argv[argc++] = mkdouble(env, (double) m->sa_mtime.tv_nsec);
      argv[argc++] = mkfh(env, m);
      break;
    case OP_MKNOD:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkname(env, m->name, m->namelen);
      argv[argc++] = mkuint(env, m->mode);
      argv[argc++] = mkdouble(env, (double) m->off);
      break;
    case OP_MKDIR:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkname(env, m->name, m->namelen);
      argv[argc++] = mkuint(env, m->mode);
      break;
    case OP_SYMLINK:
      argv[argc++] = mkname(env, m->name2, m->name2len);
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkname(env, m->name, m->namelen);
      break;
    case OP_RENAME:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkname(env, m->name, m->namelen);
      argv[argc++] = mkdouble(env, (double) m->ino2);
      argv[argc++] = mkname(env, m->name2, m->name2len);
      break;
    case OP_LINK:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkdouble(env, (double) m->ino2);
      argv[argc++] = mkname(env, m->name, m->namelen);
      break;
    case OP_OPEN: case OP_OPENDIR: case OP_ACCESS:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkuint(env, m->flags);
      break;
    case OP_READ: case OP_READDIR: case OP_READDIRPLUS:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkdouble(env, (double) m->size);
      argv[argc++] = mkoff(env, m->off);
      argv[argc++] = mkfh(env, m);
      break;
    case OP_WRITE:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkdata(env, m);
      argv[argc++] = mkoff(env, m->off);
      argv[argc++] = mkfh(env, m);
      break;
    case OP_FALLOCATE:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkuint(env, m->flags);
      argv[argc++] = mkoff(env, m->off);
      argv[argc++] = mkoff(env, m->size);
      argv[argc++] = mkfh(env, m);
      break;
    case OP_FLUSH: case OP_RELEASE: case OP_RELEASEDIR:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkfh(env, m);
      break;
    case OP_FSYNC: case OP_FSYNCDIR:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkuint(env, m->flags);
      argv[argc++] = mkfh(env, m);
      break;
    case OP_SETXATTR:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkstr(env, m->name, m->namelen);
      argv[argc++] = mkdata(env, m);
      argv[argc++] = mkuint(env, m->flags);
      break;
    case OP_GETXATTR:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkstr(env, m->name, m->namelen);
      argv[argc++] = mkdouble(env, (double) m->size);
      break;
    case OP_LISTXATTR:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkdouble(env, (double) m->size);
      break;
    case OP_REMOVEXATTR:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkstr(env, m->name, m->namelen);
      break;
    case OP_CREATE:
      argv[argc++] = mkdouble(env, (double) m->ino);
      argv[argc++] = mkname(env, m->name, m->namelen);
      argv[argc++] = mkuint(env, m->mode);
      argv[argc++] = mkuint(env, m->flags);
      break;
    default:
      break;
  }

  napi_value ret;
  napi_status st = napi_call_function(env, global, dispatch, argc, argv, &ret);
  if (st == napi_pending_exception) {
    /* the TS front (src/fuse.ts) catches handler errors itself; anything here is a bug in it: report loudly */
    napi_value err;
    napi_get_and_clear_last_exception(env, &err);
    napi_fatal_exception(env, err);
  }
  if (!keep) {
    free_msg_data(m);
    free(m);
  }
}

void handle_event(ll_session *s, napi_env env, ll_msg *m) {
  if (m->kind == EV_INIT) {
    if (s->mount_deferred) {
      napi_value info;
      napi_create_object(env, &info);
      napi_set_named_property(env, info, "protoMajor", mkuint(env, s->proto_major));
      napi_set_named_property(env, info, "protoMinor", mkuint(env, s->proto_minor));
      napi_set_named_property(env, info, "maxWrite", mkuint(env, s->max_write));
      napi_set_named_property(env, info, "maxReadahead", mkuint(env, s->max_readahead));
      napi_set_named_property(env, info, "capable", mkuint(env, s->capable));
      napi_set_named_property(env, info, "want", mkuint(env, s->want));
      napi_resolve_deferred(env, s->mount_deferred, info);
      s->mount_deferred = NULL;
    }
  } else if (m->kind == EV_EXIT) {
    s->exit_seen = 1;
  } else if (m->kind == EV_NOTIFY_DONE) {
    napi_resolve_deferred(env, m->deferred, mkuint(env, (uint32_t) m->result));
  } else if (m->kind == EV_AHEAD_DONE) {
    napi_value r;
    if (napi_create_buffer_copy(env, m->datalen, m->data, NULL, &r) != napi_ok) napi_get_undefined(env, &r);
    free(m->data);
    napi_resolve_deferred(env, m->deferred, r);
  } else if (m->kind == EV_FAST_WRITES) {
    fast_report_event(s, env, m);
  } else if (m->kind == EV_FAST_READS) {
    fast_read_report_event(s, env, m);
  } else if (m->kind == EV_FAST_CREATES) {
    fcreate_report_event(s, env, m);
  }
  free(m);
}

