/*
 * af-walk: lists a directory tree breadth first, for the FUSE worker's entry warm-up
 * (packages/fuse-worker/src/fs/entry-warmup.ts).
 *
 *   af-walk BUDGET TREE
 *
 * The worker starts it on its own mount after the sandbox's first access: every listing it makes is a
 * READDIRPLUS the worker answers, and the kernel links an entry for every name in the answer, so the
 * sandbox's first stat or open of any of them needs no LOOKUP round trip.
 *
 * Why a process of its own: a thread of the worker that is inside a request on the worker's own mount can
 * never finish if the worker is killed (the kernel waits for an answer only the dead worker could send),
 * so the worker would stay a zombie holding /dev/fuse until someone aborted the connection. This process
 * is just another client of the mount: when the worker dies, its requests fail with ENOTCONN.
 *
 * It runs as root in the host's namespaces, where a symlink inside the mount leads to a host path. So every
 * directory is opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV) from the tree's descriptor (TREE itself is the worker's mountpoint, a path of the
 * control plane's): a name the sandbox turned into a symlink after it was
 * listed is refused by the kernel, never followed, and the walk never leaves the mount. Only entries listed
 * as directories (DT_DIR) are descended into; nothing is stat'ed and no file is opened.
 *
 * Stops between two directories once BUDGET entries were listed, and on any error of the tree itself.
 * For the attack test only: with AF_WALK_STOP_AFTER=<path below the tree> it stops itself (SIGSTOP) right
 * after listing that directory, so a test can swap a listed directory for a symlink before the visit.
 * Prints one line at the end: "<entries> <directories> <refused> <complete|budget|stopped>". Dies with its
 * parent (PR_SET_PDEATHSIG).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The tree's directory: every open is beneath it. */
static int tree_fd = -1;

struct linux_dirent64 {
  unsigned long long d_ino;
  long long d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

/* The breadth-first queue: relative paths below the tree, each malloc'd, freed once visited. */
static char **queue;
static size_t queue_len, queue_cap, queue_head;

static int push(const char *parent, const char *name) {
  if (queue_len == queue_cap) {
    size_t cap = queue_cap == 0 ? 256 : queue_cap * 2;
    char **grown = realloc(queue, cap * sizeof *queue);
    if (grown == NULL) return -1;
    queue = grown;
    queue_cap = cap;
  }
  size_t plen = strlen(parent), nlen = strlen(name);
  char *path = malloc(plen + nlen + 2);
  if (path == NULL) return -1;
  if (plen > 0) {
    memcpy(path, parent, plen);
    path[plen++] = '/';
  }
  memcpy(path + plen, name, nlen + 1);
  queue[queue_len++] = path;
  return 0;
}

/*
 * Keeps only what listing directories needs: descriptors 0-2 (whatever its parent leaked beyond them is
 * closed) and CAP_DAC_READ_SEARCH (the mount shows the sandbox user's mode bits, which need not let root
 * read without it); no new privileges from here on.
 */
static int confine(void) {
  if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0) return -1;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  data[0].effective = data[0].permitted = 1U << CAP_DAC_READ_SEARCH;
  return (int) syscall(SYS_capset, &header, data);
}

/* The directory at `path` below the tree ("." for the tree), never through a symlink; -1 with errno. */
static int open_beneath(const char *path) {
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  return (int) syscall(SYS_openat2, tree_fd, path, &how, sizeof how);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: af-walk BUDGET TREE\n");
    return 2;
  }
  char *end;
  unsigned long long budget = strtoull(argv[1], &end, 10);
  if (*argv[1] == '\0' || *end != '\0') {
    fprintf(stderr, "af-walk: BUDGET must be a number of entries\n");
    return 2;
  }
  /* The worker's pid is our parent: if it is gone already, so is the mount's answerer. */
  pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) return 1;
  if (confine() != 0) {
    perror("af-walk: dropping descriptors and capabilities");
    return 1;
  }
  tree_fd = open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (tree_fd < 0) {
    printf("0 0 0 stopped\n");
    return 0;
  }

  const char *stop_after = getenv("AF_WALK_STOP_AFTER");
  unsigned long long entries = 0, directories = 0, refused = 0;
  const char *outcome = "complete";
  /* Small enough that the budget, checked after each call, is overshot by a few hundred entries at most:
   * a directory of millions of names (the sandbox can make one) is not listed whole. */
  static char buf[16 * 1024];
  if (push("", ".") != 0) return 1;
  for (; queue_head < queue_len; queue_head++) {
    char *path = queue[queue_head];
    queue[queue_head] = NULL;
    if (entries >= budget) {
      free(path);
      outcome = "budget";
      break;
    }
    int fd = open_beneath(path);
    if (fd < 0) {
      /* ELOOP/EXDEV/ENOTDIR: no longer a directory of this mount (a symlink swapped in); ENOENT: removed.
       * ENOTCONN/ENODEV: the mount is gone. */
      int err = errno;
      free(path);
      if (err == ENOTCONN || err == ENODEV || err == ENOSYS || err == EBADF) {
        outcome = "stopped";
        break;
      }
      if (err == ELOOP || err == EXDEV || err == ENOTDIR) refused++;
      continue;
    }
    directories++;
    while (strcmp(outcome, "complete") == 0) {
      if (entries >= budget) {
        outcome = "budget";
        break;
      }
      long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) {
        if (n < 0 && (errno == ENOTCONN || errno == ENODEV)) outcome = "stopped";
        break;
      }
      for (long at = 0; at < n;) {
        struct linux_dirent64 *d = (struct linux_dirent64 *) (buf + at);
        at += d->d_reclen;
        if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0) continue;
        entries++;
        if (d->d_type == DT_DIR && push(strcmp(path, ".") == 0 ? "" : path, d->d_name) != 0) {
          outcome = "stopped";
          break;
        }
      }
    }
    close(fd);
    if (stop_after != NULL && strcmp(path, stop_after) == 0) raise(SIGSTOP);
    free(path);
    if (strcmp(outcome, "complete") != 0) break;
  }
  for (size_t i = queue_head; i < queue_len; i++) free(queue[i]);
  free(queue);
  printf("%llu %llu %llu %s\n", entries, directories, refused, outcome);
  return 0;
}
