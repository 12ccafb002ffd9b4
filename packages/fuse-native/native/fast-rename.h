/* RENAMEs of a non-directory (fast-rename.c): they end only the moved and the replaced node's fast state. */
#ifndef FUSE_NATIVE_FAST_RENAME_H
#define FUSE_NATIVE_FAST_RENAME_H

/* What a RENAME ends (ll_msg.rename_ends): everything (every mark, write and read registration), nothing
 * yet (a candidate: the source is not a directory, JS has not said which nodes move), or the named nodes. */
enum { FRN_ALL = 0, FRN_CANDIDATE = 1, FRN_NODES = 2 };

int frename_decode(ll_session *s, uint64_t parent, const char *name);
void frename_after_reply(ll_msg *m);
napi_value ll_frename_enable(napi_env env, napi_callback_info info);
napi_value ll_frename_settle(napi_env env, napi_callback_info info);

#endif
