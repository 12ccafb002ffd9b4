/* The rmdir fast path (fast-rmdir.c): RMDIRs of the sandbox's own empty directories in marked ones, in C. */
#ifndef FUSE_NATIVE_FAST_RMDIR_H
#define FUSE_NATIVE_FAST_RMDIR_H

int frmdir_rmdir(ll_session *s, fuse_req_t req, uint64_t parent, const char *name);

#endif
