/* The unlink fast path (fast-unlink.c): UNLINKs of the sandbox's own files in marked directories, in C. */
#ifndef FUSE_NATIVE_FAST_UNLINK_H
#define FUSE_NATIVE_FAST_UNLINK_H

int funlink_unlink(ll_session *s, fuse_req_t req, uint64_t parent, const char *name);

#endif
