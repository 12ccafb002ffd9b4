/* The create fast path (fast-create.c): CREATEs in directories the lookup fast path marked, answered in C. */
#ifndef FUSE_NATIVE_FAST_CREATE_H
#define FUSE_NATIVE_FAST_CREATE_H

/* The shared state array (src/fast-creates.ts): whether creates are served at all (JS clears it while the
 * audit records allowed accesses), the node ids JS lent [NEXT, END), the journal's fd (-1: none), the
 * entry/attr timeout, whether write-only creates get direct I/O, the caller uid served besides root (-1:
 * any), the journal records written and not yet adopted by JS, the CREATEs answered here, the GETATTR
 * timeout, the GETATTRs and SETATTRs answered here, whether GETATTRs of marked directories are (1),
 * whether UNLINKs are (1, fast-unlink.c), the UNLINKs answered here, whether RMDIRs are (1, fast-rmdir.c),
 * the RMDIRs answered here, whether listings are (1, fast-listing.c), the listing requests answered here,
 * the pid whose requests as root no listing answers (the entry warm-up's walker; -1: none), the SETXATTRs
 * and REMOVEXATTRs answered here. */
enum {
  FC_ON = 0, FC_NEXT = 1, FC_END = 2, FC_JOURNAL_FD = 3, FC_TTL = 4, FC_DIRECT = 5, FC_CALLER_UID = 6,
  FC_UNADOPTED = 7, FC_SERVED = 8, FC_ATTR_TTL = 9, FC_ATTRS_SERVED = 10, FC_DIR_ATTRS = 11, FC_UNLINKS = 12,
  FC_UNLINKS_SERVED = 13, FC_RMDIRS = 14, FC_RMDIRS_SERVED = 15, FC_LISTINGS = 16, FC_LISTINGS_SERVED = 17,
  FC_SKIP_PID = 18, FC_XATTRS_SERVED = 19, FC_COUNT = 20
};

/* Per created entry in a report: node, parent, fd, st_ino shown, quota charged, direct I/O, journal bytes,
 * kind. A row with parent 0 only names its node: FCRK_SETATTR, a file made here whose attributes a SETATTR
 * here changed; FCRK_DIR_ATTR, a marked directory whose attributes a GETATTR here sent to the kernel.
 * FCRK_UNLINK (fast-unlink.c): FCR_INO 1 when the name was removed (0: only its record was written),
 * FCR_FD the file kept open, FCR_STINO its host st_ino. FCRK_RMDIR (fast-rmdir.c): FCR_INO 1 when the
 * directory was removed, FCR_STINO its host st_ino, FCR_FD the journal records written (1: the removal's;
 * 2: the removal's and, its rmdir(2) failed, the add's again). FCRK_LISTING (fast-listing.c): directory
 * FCR_INO listed from offset 0 here, FCR_FD 1 when it holds a regular file. One stream, so JS takes them
 * in order. */
enum { FCR_INO = 0, FCR_PARENT, FCR_FD, FCR_STINO, FCR_CHARGE, FCR_DIRECT, FCR_JBYTES, FCR_KIND, FCR_WIDTH };
enum { FCRK_CREATE = 0, FCRK_SETATTR = 1, FCRK_DIR_ATTR = 2, FCRK_UNLINK = 3, FCRK_RMDIR = 4, FCRK_LISTING = 5 };

int fcreate_create(ll_session *s, fuse_req_t req, uint64_t parent, const char *name, mode_t mode, int flags);
int fcreate_getattr(ll_session *s, fuse_req_t req, uint64_t ino);
int fcreate_setattr(ll_session *s, fuse_req_t req, uint64_t ino, struct stat *attr, int to_set);
int fcreate_setxattr(ll_session *s, fuse_req_t req, uint64_t ino);
int fcreate_pending(ll_session *s);
void fcreate_forget(ll_session *s, uint64_t ino);
void fcreate_report(ll_session *s);
void fcreate_report_event(ll_session *s, napi_env env, ll_msg *m);
void fcreate_release(ll_session *s, napi_env env);
napi_value ll_fcreate_init(napi_env env, napi_callback_info info);

/* What the unlink fast path shares with creates: the same decision that a request may be answered here. */
double *fc_shared(ll_session *s);
int fc_serving(ll_session *s, fuse_req_t req);
int fc_dir_for(ll_session *s, uint64_t parent, const char *name, size_t *namelen, const char **rel);
size_t fc_journal(ll_session *s, const char *rel, const char *name, int unbase);
void fc_add_row(ll_session *s, const double *row, const char *name, size_t namelen);
int fc_room(ll_session *s);

#endif
