// af-mountns: puts a host directory (a sandbox's FUSE view, or its launcher directory) into a running
// container's mount namespace, or takes it out again. The node agent runs it as root, one call per mount.
//
//   af-mountns mount  <pid> <host-dir> <name> <ro|rw>   clone <host-dir> and attach it at /<name>
//   af-mountns umount <pid> <name>                      detach /<name>
//
// A separate program because setns(CLONE_NEWNS) needs a single-threaded caller, which node is not. The
// clone is made in the host's namespace (open_tree), made private, nosuid and nodev (read-only with ro),
// then attached inside the container (move_mount): the container never sees the host path. The target is
// one name directly under the container's root, resolved without following any symlink and without
// crossing into another mount (openat2), so a hostile image cannot redirect the mount elsewhere; a missing
// one is created (mkdirat does not follow a symlink either).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fail(const char *what) {
  fprintf(stderr, "af-mountns: %s: %s\n", what, strerror(errno));
  return 1;
}

static int usage(void) {
  fprintf(stderr, "usage: af-mountns mount PID HOST_DIR NAME ro|rw | af-mountns umount PID NAME\n");
  return 2;
}

/* One path component, not "." or "..": the only targets the agent uses (workspace, .agentfense). */
static int valid_name(const char *name) {
  return name[0] != '\0' && strchr(name, '/') == NULL && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
         strlen(name) < 64;
}

static int parse_pid(const char *text) {
  char *end = NULL;
  long pid = strtol(text, &end, 10);
  if (end == text || *end != '\0' || pid <= 0 || pid > 0x3fffffff) return -1;
  return (int)pid;
}

static int enter(int pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/mnt", pid);
  int ns = open(path, O_RDONLY | O_CLOEXEC);
  if (ns < 0) return fail("opening the container's mount namespace");
  // setns sets this process's root and working directory to the namespace's root: the container's.
  if (setns(ns, CLONE_NEWNS) != 0) return fail("entering the container's mount namespace");
  close(ns);
  return 0;
}

static int open_target(const char *name) {
  int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return -1;
  struct open_how how = {
      .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
      .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
  };
  int fd = (int)syscall(SYS_openat2, root, name, &how, sizeof how);
  if (fd < 0 && errno == ENOENT) {
    if (mkdirat(root, name, 0755) != 0 && errno != EEXIST) return -1;
    fd = (int)syscall(SYS_openat2, root, name, &how, sizeof how);
  }
  close(root);
  return fd;
}

static int do_mount(int pid, const char *source, const char *name, int readonly) {
  int tree = (int)syscall(SYS_open_tree, AT_FDCWD, source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  if (tree < 0) return fail("cloning the host directory");
  struct mount_attr attr = {
      .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (readonly ? MOUNT_ATTR_RDONLY : 0),
      .propagation = MS_PRIVATE,
  };
  if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
    return fail("setting the clone's attributes");
  if (enter(pid) != 0) return 1;
  int target = open_target(name);
  if (target < 0) return fail("opening the mount point in the container");
  if (syscall(SYS_move_mount, tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    return fail("attaching the clone in the container");
  return 0;
}

static int do_umount(int pid, const char *name) {
  if (enter(pid) != 0) return 1;
  char path[72];
  snprintf(path, sizeof path, "/%s", name);
  if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL && errno != ENOENT)
    return fail("detaching the mount in the container");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 6 && strcmp(argv[1], "mount") == 0) {
    int pid = parse_pid(argv[2]);
    if (pid < 0 || argv[3][0] != '/' || !valid_name(argv[4])) return usage();
    if (strcmp(argv[5], "ro") != 0 && strcmp(argv[5], "rw") != 0) return usage();
    return do_mount(pid, argv[3], argv[4], strcmp(argv[5], "ro") == 0);
  }
  if (argc == 4 && strcmp(argv[1], "umount") == 0) {
    int pid = parse_pid(argv[2]);
    if (pid < 0 || !valid_name(argv[3])) return usage();
    return do_umount(pid, argv[3]);
  }
  return usage();
}
