/* The addon's entry point: the functions and constants the TS front (src/addon.ts) loads. */
#include "ll.h"
#include "fast-entries.h"
#include "fast-create.h"
#include "fast-rename.h"

/* JS handler names by OP_* number (the TS front reads them as ll_ops). */
static const char *const op_names[OP_COUNT] = {
  "", "lookup", "forget", "getattr", "setattr", "readlink", "mknod", "mkdir", "unlink",
  "rmdir", "symlink", "rename", "link", "open", "read", "write", "flush", "release",
  "fsync", "opendir", "readdir", "releasedir", "fsyncdir", "statfs", "setxattr",
  "getxattr", "listxattr", "removexattr", "access", "create", "forgetMulti",
  "fallocate", "readdirplus"
};

static void export_fn(napi_env env, napi_value exports, const char *name, napi_callback cb) {
  napi_value fn;
  napi_create_function(env, name, NAPI_AUTO_LENGTH, cb, NULL, &fn);
  napi_set_named_property(env, exports, name, fn);
}

/* Only the low-level API is bound (libfuse 3): one process cannot load libfuse 2 and 3 side by side. */
NAPI_MODULE_INIT() {
  fuse_hostio_register(env, exports);
  export_fn(env, exports, "ll_new", ll_new);
  export_fn(env, exports, "ll_mount", ll_mount);
  export_fn(env, exports, "ll_closed", ll_closed);
  export_fn(env, exports, "ll_notify", ll_notify);
  export_fn(env, exports, "ll_store_epoch", ll_store_epoch);
  export_fn(env, exports, "ll_store_ahead", ll_store_ahead);
  export_fn(env, exports, "ll_fast_init", ll_fast_init);
  export_fn(env, exports, "ll_fast_register", ll_fast_register);
  export_fn(env, exports, "ll_fast_drop", ll_fast_drop);
  export_fn(env, exports, "ll_fast_invalidate", ll_fast_invalidate);
  export_fn(env, exports, "ll_fast_fold", ll_fast_fold);
  export_fn(env, exports, "ll_fast_read_init", ll_fast_read_init);
  export_fn(env, exports, "ll_fast_read_register", ll_fast_read_register);
  export_fn(env, exports, "ll_fast_read_drop", ll_fast_read_drop);
  export_fn(env, exports, "ll_fast_read_invalidate", ll_fast_read_invalidate);
  export_fn(env, exports, "ll_fentry_init", ll_fentry_init);
  export_fn(env, exports, "ll_fentry_mark", ll_fentry_mark);
  export_fn(env, exports, "ll_fentry_unmark", ll_fentry_unmark);
  export_fn(env, exports, "ll_fcreate_init", ll_fcreate_init);
  export_fn(env, exports, "ll_frename_enable", ll_frename_enable);
  export_fn(env, exports, "ll_frename_settle", ll_frename_settle);
  export_fn(env, exports, "ll_reply_err", reply_err);
  export_fn(env, exports, "ll_reply_entry", reply_entry);
  export_fn(env, exports, "ll_reply_create", reply_create);
  export_fn(env, exports, "ll_reply_attr", reply_attr);
  export_fn(env, exports, "ll_reply_readlink", reply_readlink);
  export_fn(env, exports, "ll_reply_open", reply_open);
  export_fn(env, exports, "ll_reply_buf", reply_buf);
  export_fn(env, exports, "ll_reply_write", reply_write);
  export_fn(env, exports, "ll_reply_statfs", reply_statfs);
  export_fn(env, exports, "ll_reply_xattr", reply_xattr);
  export_fn(env, exports, "ll_replied", req_replied);
  napi_value names;
  napi_create_array_with_length(env, OP_COUNT, &names);
  for (uint32_t i = 0; i < OP_COUNT; i++) {
    napi_value s;
    napi_create_string_utf8(env, op_names[i], NAPI_AUTO_LENGTH, &s);
    napi_set_element(env, names, i, s);
  }
  napi_set_named_property(env, exports, "ll_ops", names);
  napi_value version;
  napi_create_string_utf8(env, fuse_pkgversion(), NAPI_AUTO_LENGTH, &version);
  napi_set_named_property(env, exports, "libfuse_version", version);
  return exports;
}
