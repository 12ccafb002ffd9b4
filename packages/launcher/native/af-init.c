// af-init: the in-sandbox launcher. One long-lived process per sandbox (its pid 1 where it can be) that
// spawns commands on request over one SOCK_STREAM connection to the host, so a command costs a fork+exec
// inside the sandbox instead of a new bwrap or a new `docker exec`.
//
// Wire protocol v2 (the host's side and the constants both share: packages/launcher/src/frames.ts):
// frame = u32 LE length of what follows (<= 1 MiB + 16)
// . u8 type . u32 LE id . payload.
//
// Trust: the host is trusted; everything else in the sandbox is not. Commands run as the same uid as this
// process, so a command may kill, stop or ptrace it: then the host sees a closed connection or garbage, which
// its client treats as "launcher gone". Nothing here holds a host path, a credential or a capability: its
// argv is `--fd N` or `--connect <path inside the sandbox>`, and it passes only the environment the host
// names in each SPAWN (it adds nothing). It never interprets a shell string.
//
// Built static (`cc -O2 -static`) so it runs in any image (glibc, musl or none).

#include "af-init.h"

int conn = -1;
int sig_fd = -1;
struct buf outq, inq;
struct cmd *cmds;
size_t ncmds, capcmds;

static struct cmd *find_cmd(uint32_t id) {
  for (size_t i = 0; i < ncmds; i++)
    if (cmds[i].id == id && cmds[i].pid != 0) return &cmds[i];
  return NULL;
}


/* --- SPAWN -------------------------------------------------------------------------------------------- */

static void spawn_cmd(uint32_t id, const uint8_t *p, size_t len) {
  if (id == 0 || find_cmd(id)) die_killing("SPAWN with id 0 or an id in use");
  if (len < 12) die_killing("SPAWN too short");
  uint32_t flags = get_u32(p), argc = get_u32(p + 4), envc = get_u32(p + 8);
  if (argc < 1 || argc > len || envc > len) die_killing("SPAWN with bad counts");
  /* Strings: cwd, argv[argc], env[envc], each NUL-terminated, filling the payload exactly. */
  size_t want = 1 + (size_t)argc + envc, have = 0;
  char **strs = calloc(want, sizeof(char *));
  char *copy = malloc(len - 12 + 1);
  if (!strs || !copy) die_killing("out of memory");
  memcpy(copy, p + 12, len - 12);
  for (size_t at = 0; at < len - 12;) {
    char *nul = memchr(copy + at, 0, len - 12 - at);
    if (!nul || have == want) die_killing("SPAWN strings malformed");
    strs[have++] = copy + at;
    at = (size_t)(nul - copy) + 1;
  }
  if (have != want) die_killing("SPAWN string count mismatch");
  const char *cwd = strs[0];
  char **argv = calloc(argc + 1, sizeof(char *));
  char **envp = calloc(envc + 1, sizeof(char *));
  if (!argv || !envp) die_killing("out of memory");
  for (uint32_t i = 0; i < argc; i++) argv[i] = strs[1 + i];
  for (uint32_t i = 0; i < envc; i++) envp[i] = strs[1 + argc + i];

  int errp[2] = {-1, -1}, outp[2] = {-1, -1}, errpipe[2] = {-1, -1}, inp[2] = {-1, -1};
  int e = 0;
  if (pipe2(errp, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0 || pipe2(errpipe, O_CLOEXEC) < 0 ||
      ((flags & 1) && pipe2(inp, O_CLOEXEC) < 0))
    e = errno;
  const char *what = e ? "pipe" : "fork";
  pid_t pid = e ? -1 : fork();
  if (pid < 0) {
    /* Out of descriptors or processes: the command never started; everything else carries on. */
    if (!e) e = errno;
    int all[8] = {errp[0], errp[1], outp[0], outp[1], errpipe[0], errpipe[1], inp[0], inp[1]};
    for (int i = 0; i < 8; i++)
      if (all[i] >= 0) close(all[i]);
    char msg[96];
    int n = snprintf(msg, sizeof msg, "%s: %s", what, strerror(e));
    uint8_t *q = frame_begin(4 + (size_t)n);
    put_u32(q, (uint32_t)e);
    memcpy(q + 4, msg, (size_t)n);
    frame_commit(T_FAILED, id, 4 + (size_t)n);
    free(argv); free(envp); free(strs); free(copy);
    return;
  }
  if (pid == 0) child_exec(errp[1], inp[0], outp[1], errpipe[1], cwd, argv, envp);
  close(errp[1]);
  close(outp[1]);
  close(errpipe[1]);
  if (inp[0] >= 0) close(inp[0]);
  free(argv); free(envp); free(strs); free(copy);
  set_nonblock(outp[0]);
  set_nonblock(errpipe[0]);
  if (inp[1] >= 0) set_nonblock(inp[1]);

  if (ncmds == capcmds) {
    capcmds = capcmds ? capcmds * 2 : 16;
    struct cmd *n = realloc(cmds, capcmds * sizeof *cmds);
    if (!n) die_killing("out of memory");
    cmds = n;
  }
  struct cmd *c = &cmds[ncmds++];
  memset(c, 0, sizeof *c);
  c->id = id;
  c->pid = pid;
  c->state = STARTING;
  c->start_deadline = now_ms() + START_DEADLINE_MS;
  c->err_fd = errp[0];
  c->out_fd = outp[0];
  c->err_pipe = errpipe[0];
  c->in_fd = inp[1];
}

/* --- a command's life after the fork ------------------------------------------------------------------ */

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* Frees the slot; compacted out of the array at the end of the loop iteration. */
static void forget(struct cmd *c) {
  close_fd(&c->err_fd);
  close_fd(&c->out_fd);
  close_fd(&c->err_pipe);
  close_fd(&c->in_fd);
  buf_free(&c->in_q);
  c->pid = 0;
}

/* Reads the start pipe (blocking: the child has exec'd or died, so it is at EOF or holds 8 bytes). */
static void resolve_start(struct cmd *c) {
  uint8_t p[8];
  size_t got = 0;
  int fl = fcntl(c->err_fd, F_GETFL);
  if (fl >= 0) fcntl(c->err_fd, F_SETFL, fl & ~O_NONBLOCK);
  while (got < 8) {
    ssize_t r = read(c->err_fd, p + got, 8 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close_fd(&c->err_fd);
  if (got < 8 && c->start_killed) {
    /* Stopped (or stalled) before exec and killed at its deadline: it never ran as asked. */
    static const char why[] = "start: the command did not reach exec in time (stopped before it started?)";
    uint8_t *q = frame_begin(4 + sizeof why - 1);
    put_u32(q, ETIMEDOUT);
    memcpy(q + 4, why, sizeof why - 1);
    frame_commit(T_FAILED, c->id, 4 + sizeof why - 1);
    if (!c->reaped) waitpid(c->pid, NULL, 0); /* SIGKILLed: its end is certain */
    forget(c);
    return;
  }
  if (got == 8) {
    uint32_t e = get_u32(p), stage = get_u32(p + 4);
    char msg[256];
    const char *what = stage == 1 ? "chdir" : stage == 2 ? "exec" : "setup";
    int n = snprintf(msg, sizeof msg, "%s: %s", what, strerror((int)e));
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
    uint8_t *q = frame_begin(4 + (size_t)n);
    put_u32(q, e);
    memcpy(q + 4, msg, (size_t)n);
    frame_commit(T_FAILED, c->id, 4 + (size_t)n);
    /* It never ran: reap it if not yet. SIGKILL first: it may have been stopped between its write and its
       _exit by another process of the sandbox, and a blocking wait on it would hold the whole loop. */
    if (!c->reaped) {
      kill(c->pid, SIGKILL);
      waitpid(c->pid, NULL, 0);
    }
    forget(c);
    return;
  }
  c->state = RUNNING;
  send_u32s(T_STARTED, c->id, (uint32_t)c->pid, 0, 0);
}

/* Reads at most `limit` bytes from one of a command's pipes into STDOUT/STDERR frames. Returns 0 at EOF or
   error (fd closed), 1 if it would block or hit the limit. */
static int pump_pipe(struct cmd *c, int *fd, uint8_t type, size_t limit) {
  size_t done = 0;
  while (done < limit) {
    uint8_t *p = frame_begin(OUTPUT_CHUNK);
    ssize_t r = read(*fd, p, OUTPUT_CHUNK);
    if (r > 0) {
      frame_commit(type, c->id, (size_t)r);
      done += (size_t)r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return 1;
    close_fd(fd);
    return 0;
  }
  return 1;
}

static void cmd_exited(struct cmd *c, int status) {
  if (c->state == STARTING) {
    c->reaped = 1;
    c->status = status;
    resolve_start(c);
    if (c->pid == 0) return; /* FAILED sent */
  }
  if (c->out_fd >= 0) pump_pipe(c, &c->out_fd, T_STDOUT, EXIT_DRAIN_LIMIT);
  if (c->err_pipe >= 0) pump_pipe(c, &c->err_pipe, T_STDERR, EXIT_DRAIN_LIMIT);
  if (WIFSIGNALED(status))
    send_u32s(T_EXIT, c->id, 1, (uint32_t)WTERMSIG(status), 1);
  else
    send_u32s(T_EXIT, c->id, 0, (uint32_t)WEXITSTATUS(status), 1);
  forget(c); /* closes the read ends: background writers get EPIPE */
}

static void reap_all(void) {
  struct signalfd_siginfo si;
  while (read(sig_fd, &si, sizeof si) == sizeof si) {
  }
  for (;;) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid <= 0) return;
    for (size_t i = 0; i < ncmds; i++)
      if (cmds[i].pid == pid) {
        cmd_exited(&cmds[i], st);
        break;
      }
    /* Not ours: an orphan reparented to us (pid 1 or subreaper). Reaped, not reported. */
  }
}

static void write_stdin(struct cmd *c) {
  while (c->in_q.len > 0) {
    ssize_t w = write(c->in_fd, c->in_q.data + c->in_q.off, c->in_q.len);
    if (w > 0) {
      buf_consume(&c->in_q, (size_t)w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) return;
    /* EPIPE: the command closed its stdin; what is left is dropped. */
    buf_free(&c->in_q);
    close_fd(&c->in_fd);
    return;
  }
  if (c->in_close) close_fd(&c->in_fd);
}

/* --- frames from the host ----------------------------------------------------------------------------- */

static void handle_frame(uint8_t type, uint32_t id, const uint8_t *p, size_t len) {
  struct cmd *c;
  switch (type) {
  case T_SPAWN:
    spawn_cmd(id, p, len);
    return;
  case T_STDIN:
    if (id == 0) die_killing("STDIN for id 0");
    c = find_cmd(id);
    /* Unknown id: the command already ended (EXIT may be in flight); the bytes have nowhere to go. */
    if (!c || c->in_fd < 0 || c->in_close) return;
    if (len == 0) {
      c->in_close = 1;
    } else {
      buf_reserve(&c->in_q, len);
      memcpy(c->in_q.data + c->in_q.off + c->in_q.len, p, len);
      c->in_q.len += len;
    }
    write_stdin(c);
    return;
  case T_SIGNAL:
    if (id == 0 || len != 4) die_killing("malformed SIGNAL");
    c = find_cmd(id);
    /* Until the child's setsid() there is no group of that id yet: then the child itself. */
    if (c && !c->reaped && kill(-c->pid, (int)get_u32(p)) < 0 && errno == ESRCH) kill(c->pid, (int)get_u32(p));
    return;
  case T_PING:
    send_frame(T_PONG, id, p, len);
    return;
  case T_PAUSE:
  case T_RESUME:
    if (id == 0 || len != 0) die_killing("malformed PAUSE or RESUME");
    c = find_cmd(id);
    /* Unknown id: the command already ended; its last output may still be on the way. At its exit its
       pipes are drained (EXIT_DRAIN_LIMIT) whether paused or not. */
    if (c) c->paused = type == T_PAUSE;
    return;
  default:
    die_killing("unknown frame type");
  }
}

static void read_conn(void) {
  for (;;) {
    buf_reserve(&inq, 65536);
    ssize_t r = read(conn, inq.data + inq.off + inq.len, inq.cap - inq.off - inq.len);
    if (r == 0) die_killing("the host closed the connection");
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      die_killing("reading the connection failed");
    }
    inq.len += (size_t)r;
    if ((size_t)r < 65536) break;
  }
  while (inq.len >= 4) {
    uint32_t flen = get_u32(inq.data + inq.off);
    if (flen < 5 || flen > MAX_FRAME_LENGTH) die_killing("frame length out of range");
    if (inq.len < 4 + (size_t)flen) break;
    const uint8_t *f = inq.data + inq.off;
    handle_frame(f[4], get_u32(f + 5), f + 9, flen - 5);
    buf_consume(&inq, 4 + (size_t)flen);
  }
}

static void write_conn(void) {
  while (outq.len > 0) {
    ssize_t w = send(conn, outq.data + outq.off, outq.len, MSG_NOSIGNAL);
    if (w > 0) {
      buf_consume(&outq, (size_t)w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) return;
    die_killing("writing the connection failed");
  }
}

/* --- setup and the loop ------------------------------------------------------------------------------- */

static int connect_to(const char *path) {
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof addr.sun_path) {
    fprintf(stderr, "af-init: socket path too long\n");
    exit(2);
  }
  strcpy(addr.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
    fprintf(stderr, "af-init: connect %s: %s\n", path, strerror(errno));
    exit(1);
  }
  return fd;
}

static void usage(void) {
  fprintf(stderr, "usage: af-init --fd N | --connect PATH\n");
  exit(2);
}

int main(int argc, char **argv) {
  if (argc != 3) usage();
  if (strcmp(argv[1], "--fd") == 0) {
    char *end;
    long n = strtol(argv[2], &end, 10);
    if (*argv[2] == '\0' || *end != '\0' || n < 0 || n > 1 << 20) usage();
    conn = (int)n;
    if (fcntl(conn, F_SETFD, FD_CLOEXEC) < 0) {
      fprintf(stderr, "af-init: fd %ld is not open\n", n);
      exit(2);
    }
  } else if (strcmp(argv[1], "--connect") == 0) {
    conn = connect_to(argv[2]);
  } else {
    usage();
  }
  set_nonblock(conn);
  /* Not dumpable: a command (same uid) can neither ptrace us nor open our /proc files (fds, memory), so
     it cannot take over the connection. execve makes each command dumpable again as usual. */
  prctl(PR_SET_DUMPABLE, 0);
  signal(SIGPIPE, SIG_IGN);
  /* Orphans of our commands come to us when we are not pid 1, so they are reaped and not zombies. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  sig_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sig_fd < 0) die_killing("signalfd failed");

  send_u32s(T_READY, 0, PROTOCOL_VERSION, (uint32_t)getpid(), 1);

  struct pollfd *pfds = NULL;
  size_t pcap = 0;
  for (;;) {
    /* Slot layout: [0] connection, [1] signalfd, then 4 per command (start, stdout, stderr, stdin). */
    size_t need = 2 + 4 * ncmds;
    if (need > pcap) {
      pcap = need * 2;
      pfds = realloc(pfds, pcap * sizeof *pfds);
      if (!pfds) die_killing("out of memory");
    }
    int reading = outq.len < OUTQ_HIGH;
    pfds[0] = (struct pollfd){conn, (short)(POLLIN | (outq.len ? POLLOUT : 0)), 0};
    pfds[1] = (struct pollfd){sig_fd, POLLIN, 0};
    for (size_t i = 0; i < ncmds; i++) {
      struct cmd *c = &cmds[i];
      struct pollfd *q = &pfds[2 + 4 * i];
      q[0] = (struct pollfd){c->state == STARTING ? c->err_fd : -1, POLLIN, 0};
      int run = c->state == RUNNING && reading && !c->paused;
      q[1] = (struct pollfd){run ? c->out_fd : -1, POLLIN, 0};
      q[2] = (struct pollfd){run ? c->err_pipe : -1, POLLIN, 0};
      q[3] = (struct pollfd){c->in_q.len ? c->in_fd : -1, POLLOUT, 0};
    }
    size_t polled = ncmds;
    int wait_ms = -1;
    int64_t now = now_ms();
    for (size_t i = 0; i < ncmds; i++) {
      struct cmd *c = &cmds[i];
      if (c->state != STARTING || c->start_killed) continue;
      int64_t left = c->start_deadline - now;
      if (left < 0) left = 0;
      if (wait_ms < 0 || left < wait_ms) wait_ms = (int)left;
    }
    if (poll(pfds, need, wait_ms) < 0) {
      if (errno == EINTR) continue;
      die_killing("poll failed");
    }
    /* Commands first (starts resolve before their output is read), then exits, then the host. */
    for (size_t i = 0; i < polled; i++) {
      struct cmd *c = &cmds[i];
      struct pollfd *q = &pfds[2 + 4 * i];
      if (c->pid == 0) continue;
      if (q[0].revents && c->state == STARTING) resolve_start(c);
      if (c->pid == 0) continue;
      if (q[1].revents && c->out_fd == q[1].fd) pump_pipe(c, &c->out_fd, T_STDOUT, OUTPUT_CHUNK);
      if (q[2].revents && c->err_pipe == q[2].fd) pump_pipe(c, &c->err_pipe, T_STDERR, OUTPUT_CHUNK);
      if (q[3].revents && c->in_fd == q[3].fd) write_stdin(c);
    }
    if (pfds[1].revents) reap_all();
    /* Starts past their deadline: kill; the start pipe's EOF then reports them FAILED. */
    now = now_ms();
    for (size_t i = 0; i < ncmds; i++) {
      struct cmd *c = &cmds[i];
      if (c->pid != 0 && c->state == STARTING && !c->start_killed && now >= c->start_deadline) {
        kill(c->pid, SIGKILL);
        c->start_killed = 1;
      }
    }
    if (pfds[0].revents & (POLLIN | POLLHUP | POLLERR)) read_conn();
    write_conn();
    /* Compact forgotten commands out of the table. */
    size_t k = 0;
    for (size_t i = 0; i < ncmds; i++)
      if (cmds[i].pid != 0) cmds[k++] = cmds[i];
    ncmds = k;
  }
}
