// The child side of a SPAWN: from fork to execve of the command (or its failure, reported on the start
// pipe with the stage it failed at).
#include "af-init.h"

static void child_fail(int err_w, uint32_t stage, int err) {
  uint8_t p[8];
  put_u32(p, (uint32_t)err);
  put_u32(p + 4, stage);
  ssize_t r = write(err_w, p, 8);
  (void)r;
  _exit(127);
}

/* execvp's search with PATH taken from the command's own environment (or DEFAULT_PATH), never from ours,
   and without execvp's ENOEXEC fallback to /bin/sh. */
static int exec_search(char **argv, char **envp) {
  const char *file = argv[0];
  if (strchr(file, '/')) {
    execve(file, argv, envp);
    return errno;
  }
  const char *path = NULL;
  for (char **e = envp; *e; e++)
    if (strncmp(*e, "PATH=", 5) == 0) path = *e + 5;
  if (!path) path = DEFAULT_PATH;
  size_t flen = strlen(file);
  int saw_eacces = 0, last = ENOENT;
  for (const char *p = path;; p++) {
    const char *end = strchrnul(p, ':');
    size_t dlen = (size_t)(end - p);
    char *full = malloc(dlen + flen + 3);
    if (!full) return ENOMEM;
    if (dlen == 0) {
      memcpy(full, "./", 2);
      memcpy(full + 2, file, flen + 1);
    } else {
      memcpy(full, p, dlen);
      full[dlen] = '/';
      memcpy(full + dlen + 1, file, flen + 1);
    }
    execve(full, argv, envp);
    int e = errno;
    free(full);
    switch (e) {
    case EACCES:
      saw_eacces = 1;
      break;
    case ENOENT: case ENOTDIR: case ESTALE: case ENODEV: case ETIMEDOUT: case ELOOP: case ENAMETOOLONG:
      break;
    default:
      return e;
    }
    last = e;
    if (*end == '\0') break;
    p = end;
  }
  return saw_eacces ? EACCES : last;
}

static void close_from(int lowfd) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, (unsigned)lowfd, ~0u, 0u) == 0) return;
#endif
  long max = sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536) max = 65536;
  for (int fd = lowfd; fd < max; fd++) close(fd);
}

void child_exec(int err_w, int in_r, int out_w, int err_wr, const char *cwd, char **argv,
                       char **envp) {
  if (setsid() < 0) child_fail(err_w, 3, errno);
  /* Dispositions: ignored ones survive exec, so reset every one; handlers reset themselves. */
  for (int s = 1; s < NSIG; s++)
    if (s != SIGKILL && s != SIGSTOP) signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  int nullfd = -1;
  if (in_r < 0) {
    nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullfd < 0) child_fail(err_w, 3, errno);
    in_r = nullfd;
  }
  /* Lift every descriptor we keep above the low numbers first, so no dup2 below overwrites another. */
  int keep[4] = {err_w, in_r, out_w, err_wr};
  for (int i = 0; i < 4; i++) {
    int hi = fcntl(keep[i], F_DUPFD_CLOEXEC, 16);
    if (hi < 0) child_fail(err_w, 3, errno);
    keep[i] = hi;
  }
  err_w = keep[0];
  if (dup2(keep[1], 0) < 0 || dup2(keep[2], 1) < 0 || dup2(keep[3], 2) < 0) child_fail(err_w, 3, errno);
  if (dup3(err_w, 3, O_CLOEXEC) < 0) child_fail(err_w, 3, errno);
  err_w = 3;
  close_from(4);
  if (chdir(cwd) < 0) child_fail(err_w, 1, errno);
  child_fail(err_w, 2, exec_search(argv, envp));
}
