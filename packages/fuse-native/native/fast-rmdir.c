/* The rmdir fast path: an RMDIR in a directory the lookup fast path marked, where the unlink fast path
 * would answer an UNLINK (fc_serving, fc_dir_for: the writable layer alone holds the directory, every path
 * below it is `write`, the codebase still lacks it, the caller is the sandbox's, the audit records no
 * allowed access), is answered here without entering JS, when the name is a directory with no entry.
 *
 * Why that is the worker's answer too (namespace-ops.ts rmdir, delta.ts rmdir, records.ts removeEntry):
 * the codebase lacks the marked directory, so it lacks everything below it, and an upper directory with
 * no entry is empty in the merged view (mergedIsEmpty); every directory below a marked one carries an add
 * record (mkdir and rename record one; nothing of the codebase is mirrored there), so the removal's record
 * is `{"op":"unbase",...}`, journaled before the directory goes. Anything else (an entry inside, a
 * symlink, an odd name) goes to JS, which decides and answers as before.
 *
 * Order: the directory is opened (O_DIRECTORY | O_NOFOLLOW: a directory, never followed) and read once
 * for an entry besides `.` and `..`; the record is appended; rmdir(2) on the parent's own fd. Should that
 * fail (an entry made meanwhile), the add's record is appended again so the journal says what the layer
 * holds, both are reported and JS answers the request.
 *
 * Reported in the create fast path's stream (FCRK_RMDIR), so JS takes it in order with creates and
 * unlinks before its next request: the records join the delta's state, the quota lets the inode go, the
 * inode table drops the name, the parent's listing and subdirectory count are dropped.
 * JS thread only, like everything touching the session. */
#include "ll.h"
#include "fast-entries.h"
#include "fast-create.h"
#include "fast-rmdir.h"

#include <sys/syscall.h>

struct fr_dirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

/* 1 when directory `fd` holds nothing besides `.` and `..`; 0 when it holds something or cannot be read. */
static int empty_dir(int fd) {
  char buf[1024];
  long n;
  while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
    for (long at = 0; at < n;) {
      struct fr_dirent64 *d = (struct fr_dirent64 *) (buf + at);
      const char *nm = d->d_name;
      if (!(nm[0] == '.' && (nm[1] == 0 || (nm[1] == '.' && nm[2] == 0)))) return 0;
      at += d->d_reclen;
    }
  }
  return n == 0;
}

int frmdir_rmdir(ll_session *s, fuse_req_t req, uint64_t parent, const char *name) {
  double *sh = fc_shared(s);
  if (!sh || sh[FC_RMDIRS] != 1 || !fc_serving(s, req)) return 0;
  size_t namelen;
  const char *rel;
  int dirfd = fc_dir_for(s, parent, name, &namelen, &rel);
  if (dirfd < 0) return 0;
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st;
  int ok = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && empty_dir(fd);
  close(fd);
  if (!ok) return 0;
  size_t jbytes = fc_journal(s, rel, name, 1);
  if (jbytes == 0) return 0;
  double row[FCR_WIDTH] = { 1, (double) parent, 1, (double) st.st_ino, 0, 0, (double) jbytes, FCRK_RMDIR };
  if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0) {
    struct stat still;
    row[FCR_INO] = 0;
    /* still the directory: the add's record again (mkdir's, prepareCreate), or the state lost its base */
    if (fstatat(dirfd, name, &still, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(still.st_mode) && still.st_ino == st.st_ino) {
      size_t again = fc_journal(s, rel, name, 0);
      if (again > 0) {
        row[FCR_FD] = 2;
        row[FCR_JBYTES] += (double) again;
      }
    }
    fc_add_row(s, row, name, namelen);
    return 0;
  }
  fc_add_row(s, row, name, namelen);
  sh[FC_RMDIRS_SERVED] += 1;
  fuse_reply_err(req, 0);
  return 1;
}
