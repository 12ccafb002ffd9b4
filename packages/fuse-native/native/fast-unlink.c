/* The unlink fast path: an UNLINK in a directory the lookup fast path marked, where the create fast path
 * would answer a CREATE (fc_serving, fc_dir_for: the writable layer alone holds the directory, every path
 * below it is `write`, the codebase still lacks it, the caller is the sandbox's, the audit records no
 * allowed access), is answered here without entering JS, when the name is a regular file with one link
 * and under 1 MiB allocated (a bigger one is freed inside unlink(2): JS does that in its thread pool).
 *
 * What JS would do (namespace-ops.ts unlink, delta/records.ts removeEntry), in its order: the file is
 * opened (read-write: the sandbox's own) and kept for a descriptor the sandbox may still hold; the
 * removal's record (`{"op":"unbase",...}`: the codebase never had a path below such a directory, so no
 * whiteout) is journaled before the name goes; then unlinkat(2) on the directory's own fd, which never
 * follows a symlink and touches only that directory's entry. The write fast path's decisions were dropped
 * at the decode (decode.c), as for every UNLINK.
 *
 * The removal is reported in the create fast path's stream (FCRK_UNLINK), so JS takes creates and
 * unlinks in their order before its next request: the record joins the delta's state, the quota lets the
 * inode go, the inode table drops the name, the kept fd joins the handle cache (pinned), the kernel-cache
 * bookkeeping an UNLINK makes is made. A failed step goes to JS; a record written before a failed
 * unlinkat(2) is adopted alone (JS then removes the file and writes the same record again).
 * JS thread only, like everything touching the session. */
#include "ll.h"
#include "fast-entries.h"
#include "fast-create.h"
#include "fast-unlink.h"

/* host/walk.ts POOL_UNLINK_BYTES: from this much allocated, JS unlinks in the thread pool. */
#define FU_POOL_BYTES (1u << 20)

int funlink_unlink(ll_session *s, fuse_req_t req, uint64_t parent, const char *name) {
  double *sh = fc_shared(s);
  if (!sh || sh[FC_UNLINKS] != 1 || !fc_serving(s, req)) return 0;
  size_t namelen;
  const char *rel;
  int dirfd = fc_dir_for(s, parent, name, &namelen, &rel);
  if (dirfd < 0) return 0;
  struct stat st, kept;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
      (uint64_t) st.st_blocks * 512 >= FU_POOL_BYTES)
    return 0;
  /* O_NOFOLLOW and the same inode again: what is kept is the file that is removed, nothing a name swap
   * put there (JS owns every change of the layer, but a regular file is all this opens). */
  int fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return 0;
  if (fstat(fd, &kept) != 0 || !S_ISREG(kept.st_mode) || kept.st_ino != st.st_ino || kept.st_dev != st.st_dev) {
    close(fd);
    return 0;
  }
  size_t jbytes = fc_journal(s, rel, name, 1);
  if (jbytes == 0) {
    close(fd);
    return 0;
  }
  double row[FCR_WIDTH] = { 1, (double) parent, fd, (double) st.st_ino, 0, 0, (double) jbytes, FCRK_UNLINK };
  if (unlinkat(dirfd, name, 0) != 0) {
    close(fd);
    row[FCR_INO] = 0;
    row[FCR_FD] = -1;
    fc_add_row(s, row, name, namelen);
    return 0;
  }
  fc_add_row(s, row, name, namelen);
  sh[FC_UNLINKS_SERVED] += 1;
  fuse_reply_err(req, 0);
  return 1;
}
