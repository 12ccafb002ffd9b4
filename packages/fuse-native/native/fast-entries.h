/* The lookup fast path (fast-entries.c): LOOKUP misses in directories JS marked, answered in C. */
#ifndef FUSE_NATIVE_FAST_ENTRIES_H
#define FUSE_NATIVE_FAST_ENTRIES_H

/* The shared state array (src/fast-entries.ts): the marks' generation (a mark made under an older one is
 * not served), the caller uid served besides root (-1: any), the LOOKUPs answered here. */
enum { FE_GEN = 0, FE_CALLER_UID = 1, FE_SERVED = 2, FE_COUNT = 4 };

int fentry_lookup(ll_session *s, fuse_req_t req, uint64_t parent, const char *name);
void fentry_revoke(ll_session *s);
int fentry_dir(ll_session *s, uint64_t ino, const char **rel);
int fentry_dir_attrs(ll_session *s, uint64_t ino, uint64_t *st_ino);
double fentry_gen(ll_session *s);
void fentry_free(ll_session *s);
void fentry_release(ll_session *s, napi_env env);
napi_value ll_fentry_init(napi_env env, napi_callback_info info);
napi_value ll_fentry_mark(napi_env env, napi_callback_info info);
napi_value ll_fentry_unmark(napi_env env, napi_callback_info info);

#endif
