// af-init's internal header: the wire protocol's constants, the byte queues, the command table and the
// functions af-init.c, af-init-frames.c and af-init-child.c share (af-init.c says what af-init is).
#ifndef AF_INIT_H
#define AF_INIT_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROTOCOL_VERSION 2u
#define HEADER_BYTES 9u                       /* u32 length + u8 type + u32 id */
#define MAX_FRAME_LENGTH (1024u * 1024u + 16u) /* the length field's largest value */
#define OUTPUT_CHUNK 65536u                    /* largest STDOUT/STDERR payload */
/* Stop reading commands' pipes while this much is queued for the host: its backpressure reaches them. */
#define OUTQ_HIGH (512u * 1024u)
/* At a command's exit, read at most this much more from each pipe: a background writer that keeps the pipe
   full must not keep us draining forever ("what the pipes held at that moment"). */
#define EXIT_DRAIN_LIMIT (1024u * 1024u)
/* How long a forked command may take to reach execve. Past it, the child is SIGKILLed and reported
   FAILED (ETIMEDOUT): between fork and exec it runs as the agent's uid, so any process of the sandbox can
   SIGSTOP it (pids are sequential, ns_last_pid is readable), and the host waits for STARTED/FAILED before
   a timeout or a kill can name the command. Generous: a fork+exec takes milliseconds even under load. */
#define START_DEADLINE_MS 10000
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

enum {
  T_SPAWN = 1,
  T_STDIN = 2,
  T_SIGNAL = 3,
  T_PING = 4,
  T_PAUSE = 5,  /* stop reading this command's output pipes: its consumer is behind (v2) */
  T_RESUME = 6, /* read them again (v2) */
  T_READY = 10,
  T_STARTED = 11,
  T_FAILED = 12,
  T_STDOUT = 13,
  T_STDERR = 14,
  T_EXIT = 15,
  T_PONG = 16,
};

struct buf {
  uint8_t *data;
  size_t off, len, cap; /* live bytes are data[off, off+len) */
};

static inline int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

enum cmd_state { STARTING, RUNNING };

struct cmd {
  uint32_t id;
  pid_t pid;
  enum cmd_state state;
  int err_fd;          /* STARTING: close-on-exec pipe; the child writes errno + stage if it never execs */
  int out_fd, err_pipe; /* read ends of the command's stdout/stderr, -1 once at EOF */
  int in_fd;           /* write end of its stdin pipe, -1 if none or closed */
  int in_close;        /* an empty STDIN arrived: close in_fd once in_q is written */
  int reaped, status;  /* reaped before its start was resolved */
  int64_t start_deadline; /* STARTING: monotonic ms after which the child is killed */
  int start_killed;    /* killed at its start deadline: reported FAILED, never STARTED */
  int paused;          /* PAUSE received: its pipes are not read (it blocks writing them, as on a terminal) */
  struct buf in_q;
};

/* af-init.c: the connection to the host, the signalfd of SIGCHLD, the queues to and from the host, and the
   command table (a command's slot is free when its pid is 0). */
extern int conn;
extern int sig_fd;
extern struct buf outq, inq;
extern struct cmd *cmds;
extern size_t ncmds, capcmds;

/* af-init-frames.c */
void buf_reserve(struct buf *b, size_t more);
void buf_consume(struct buf *b, size_t n);
void buf_free(struct buf *b);
void put_u32(uint8_t *p, uint32_t v);
uint32_t get_u32(const uint8_t *p);
uint8_t *frame_begin(size_t payload_room);
void frame_commit(uint8_t type, uint32_t id, size_t payload_len);
void send_frame(uint8_t type, uint32_t id, const void *payload, size_t len);
void send_u32s(uint8_t type, uint32_t id, uint32_t a, uint32_t b, int two);
void die_killing(const char *why) __attribute__((noreturn));
void set_nonblock(int fd);

/* af-init-child.c */
void child_exec(int err_w, int in_r, int out_w, int err_wr, const char *cwd, char **argv, char **envp);

#endif
