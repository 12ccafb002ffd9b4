/* The listing fast path (fast-listing.c): READDIR(PLUS) of the sandbox's own marked directories, in C. */
#ifndef FUSE_NATIVE_FAST_LISTING_H
#define FUSE_NATIVE_FAST_LISTING_H

int flist_readdir(ll_session *s, fuse_req_t req, uint64_t ino, size_t size, uint64_t off, int plus);
void flist_free(ll_session *s);

#endif
