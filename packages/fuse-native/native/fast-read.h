/* The read fast path (fast-read.c): READs on files whose decision JS already made, answered in the
 * binding's read loop without entering JS. Included by ll.h; JS thread only. */
#ifndef FUSE_NATIVE_FAST_READ_H
#define FUSE_NATIVE_FAST_READ_H

struct fast_read; /* the per-session state, NULL until ll_fast_read_init */

int fast_read(ll_session *s, fuse_req_t req, uint64_t ino, size_t size, off_t off);
void fast_read_invalidate(ll_session *s);
void fast_read_forget(ll_session *s, uint64_t ino);
/* The registrations' generation now (0 without the read fast path), and the fd a READ of `ino` is served
 * from if its registration is of generation `gen` and current, else -1 (fast-create.c). */
uint32_t fast_read_gen(ll_session *s);
int fast_read_fd_since(ll_session *s, uint64_t ino, uint32_t gen);
int fast_read_pending(ll_session *s);
void fast_read_report(ll_session *s);
void fast_read_report_event(ll_session *s, napi_env env, ll_msg *m);
void fast_read_free(ll_session *s, napi_env env);
napi_value ll_fast_read_init(napi_env env, napi_callback_info info);
napi_value ll_fast_read_register(napi_env env, napi_callback_info info);
napi_value ll_fast_read_drop(napi_env env, napi_callback_info info);
napi_value ll_fast_read_invalidate(napi_env env, napi_callback_info info);

#endif
