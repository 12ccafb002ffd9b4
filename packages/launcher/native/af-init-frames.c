// af-init's frames to the host and the byte queues they go through; and the way out when the host's
// control is lost (die_killing).
#include "af-init.h"

void buf_reserve(struct buf *b, size_t more) {
  if (b->off + b->len + more <= b->cap) return;
  if (b->off > 0) { /* compact first */
    memmove(b->data, b->data + b->off, b->len);
    b->off = 0;
    if (b->len + more <= b->cap) return;
  }
  size_t cap = b->cap ? b->cap : 65536;
  while (cap < b->len + more) cap *= 2;
  uint8_t *d = realloc(b->data, cap);
  if (!d) die_killing("out of memory");
  b->data = d;
  b->cap = cap;
}

void buf_consume(struct buf *b, size_t n) {
  b->off += n;
  b->len -= n;
  if (b->len == 0) b->off = 0;
}

void buf_free(struct buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

void put_u32(uint8_t *p, uint32_t v) {
  p[0] = v & 0xff;
  p[1] = (v >> 8) & 0xff;
  p[2] = (v >> 16) & 0xff;
  p[3] = (v >> 24) & 0xff;
}

uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reserves a frame header in the outgoing queue; returns where the payload goes. */
uint8_t *frame_begin(size_t payload_room) {
  buf_reserve(&outq, HEADER_BYTES + payload_room);
  return outq.data + outq.off + outq.len + HEADER_BYTES;
}

void frame_commit(uint8_t type, uint32_t id, size_t payload_len) {
  uint8_t *h = outq.data + outq.off + outq.len;
  put_u32(h, (uint32_t)(1 + 4 + payload_len));
  h[4] = type;
  put_u32(h + 5, id);
  outq.len += HEADER_BYTES + payload_len;
}

void send_frame(uint8_t type, uint32_t id, const void *payload, size_t len) {
  uint8_t *p = frame_begin(len);
  if (len) memcpy(p, payload, len);
  frame_commit(type, id, len);
}

void send_u32s(uint8_t type, uint32_t id, uint32_t a, uint32_t b, int two) {
  uint8_t p[8];
  put_u32(p, a);
  put_u32(p + 4, b);
  send_frame(type, id, p, two ? 8 : 4);
}

/* The connection broke or the host spoke garbage: nothing may outlive the host's control. As pid 1,
   kill(-1) reaches every process of the namespace; otherwise each command's group. */
void die_killing(const char *why) {
  if (getpid() == 1) {
    kill(-1, SIGKILL);
  } else {
    for (size_t i = 0; i < ncmds; i++)
      if (cmds[i].pid > 0 && !cmds[i].reaped) kill(-cmds[i].pid, SIGKILL);
  }
  fprintf(stderr, "af-init: %s; killed every command\n", why);
  _exit(1);
}

void set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) die_killing("fcntl failed");
}
