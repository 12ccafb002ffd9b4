/* A RENAME whose source is not a directory moves no directory, so no mark's path and no rule of any path
 * but the moved name's changes: it ends only the fast state of the node that moves and of the node its new
 * name replaces (their write and read registrations and "made here" state), and keeps every directory's
 * mark and every other node's registrations. Any other RENAME ends everything, at its decode and again at
 * its reply, as it always did (a registration JS made meanwhile may be of the old path).
 *
 * Where "not a directory" comes from. At decode C knows only (parent, name, newparent, newname): the
 * source parent must be a current mark (fentry_dir: only the writable layer holds it, the codebase still
 * lacks it), so fstatat(its fd, name, NOFOLLOW) in the writable layer is the whole truth about the name,
 * and it must say "not a directory". Then JS, in the same synchronous turn that starts its RENAME handler
 * (before it changes anything), names the moved node and the replaced one from its inode table, each not a
 * directory (ll_frename_settle); C ends their state at once and again at the reply. If JS is in doubt (a
 * node it does not know, a directory) it says so and everything ends then and at the reply.
 *
 * Races. The kernel holds both parents' i_rwsem from lock_rename until FUSE's answer (fs/namei.c
 * do_renameat2, fs/fuse/dir.c fuse_rename2 under it), so none of the sandbox's own requests can change
 * either name meanwhile, and every earlier request on those names was answered, its change done. A change
 * behind the mount (commit, discard, checkpoint, restore) bumps every generation and JS's own check at its
 * turn sees the state it will act on. A READ or WRITE served here between decode and the worker's turn is
 * under the old path, which is still the node's then; from the worker's turn to the reply the moved node's
 * registrations are gone, and the reply ends any JS made from the old path meanwhile. The kernel itself
 * refuses a non-directory over a directory (EISDIR in may_delete), and renameat2 flags are ENOSYS
 * (decode.c). A node with several names keeps only one path in JS; it is the moved node, so its state ends
 * wherever its other names are. LINK still ends everything (fast.c, reply.c).
 * JS thread only, like everything touching the session. */
#include "ll.h"
#include "fast-entries.h"
#include "fast-create.h"
#include "fast-rename.h"

static void end_all(ll_session *s) {
  fast_invalidate(s);
  fast_read_invalidate(s);
  fentry_revoke(s);
}

static void end_node(ll_session *s, uint64_t ino) {
  if (ino == 0) return;
  fast_forget_ino(s, ino);
  fast_read_forget(s, ino);
  fcreate_forget(s, ino);
}

/* At decode: FRN_CANDIDATE when the source is provably not a directory (nothing ended yet), else
 * everything ends now and FRN_ALL. */
int frename_decode(ll_session *s, uint64_t parent, const char *name) {
  const char *rel;
  struct stat st;
  int dirfd = s->narrow_renames ? fentry_dir(s, parent, &rel) : -1;
  if (dirfd >= 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
    return FRN_CANDIDATE;
  }
  end_all(s);
  return FRN_ALL;
}

/* At the reply (or a request dropped unanswered): the named nodes' state ends again, or everything. */
void frename_after_reply(ll_msg *m) {
  if (m->kind != OP_RENAME) return;
  if (m->rename_ends == FRN_NODES) {
    end_node(m->s, m->rename_nodes[0]);
    end_node(m->s, m->rename_nodes[1]);
  } else {
    end_all(m->s);
  }
}

/* ll_frename_enable(session): RENAMEs of a non-directory may end only their nodes' state from now on. */
napi_value ll_frename_enable(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  ll_session *s = argc < 1 ? NULL : get_session(env, argv[0]);
  if (s) s->narrow_renames = 1;
  return NULL;
}

/* ll_frename_settle(req, moved, replaced) -> whether only those nodes' state ends (0 for replaced: none;
 * moved 0: in doubt, everything ends now). Only for a RENAME decoded as a candidate and not answered. */
napi_value ll_frename_settle(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  void *p = NULL;
  uint64_t moved, replaced;
  if (argc < 3 || napi_get_value_external(env, argv[0], &p) != napi_ok || !p || !get_u64(env, argv[1], &moved) ||
      !get_u64(env, argv[2], &replaced)) {
    napi_throw_type_error(env, NULL, "renameSettle(req, moved, replaced)");
    return NULL;
  }
  ll_msg *m = p;
  int narrow = 0;
  if (m->kind == OP_RENAME && !m->replied && m->rename_ends == FRN_CANDIDATE) {
    if (moved == 0) {
      end_all(m->s);
      m->rename_ends = FRN_ALL;
    } else {
      m->rename_nodes[0] = moved;
      m->rename_nodes[1] = replaced;
      m->rename_ends = FRN_NODES;
      end_node(m->s, moved);
      end_node(m->s, replaced);
      narrow = 1;
    }
  }
  napi_value r;
  napi_get_boolean(env, narrow, &r);
  return r;
}
