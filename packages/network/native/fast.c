// The policy point's accept path in C (src/fast-accept.ts), on the relay's epoll thread: it accepts the
// proxy port's connections itself, and a redirected TLS connection whose name, address and port
// JavaScript already decided allowed (the table below, filled by JavaScript with its own decisions and
// cleared at every policy change) is dialled and spliced here without waking Node; Node hears of it
// afterwards (REPORT_STARTED, then the relay's end report) for its audit and connection table.
// A client of the explicit proxy whose CONNECT names a name:port JavaScript allowed is fast-connect.c's;
// a redirected connection whose first bytes are a simple GET or HEAD whose Host JavaScript allowed at
// that address and port is dialled here and its head sent by fast-http.c.
// Everything else — no entry, a ClientHello not whole in the first record, no name, the bound
// reached — is handed to JavaScript as an accepted descriptor, its bytes unread (MSG_PEEK), and takes
// the JavaScript path.
// Its JavaScript side (fastStart, fastListen, fastRemember, ...) is fast-js.c.
#include "fast.h"
#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PEEK_BYTES 16384
/**
 * How long an accepted connection to an address with entries may take to send its first bytes (a
 * ClientHello, a plain-HTTP head).
 */
#define PEEK_MS 100
#define DIAL_MS 15000
#define PROXY_PORT 3128

// The address the agent dialled, spelt as netns.c's originalDestination spells it.
static int original_destination(struct pending *p) {
  struct sockaddr_storage *ss = &p->dst;
  p->dst_len = sizeof *ss;
  if (getsockopt(p->client, SOL_IP, SO_ORIGINAL_DST, ss, &p->dst_len) == 0 && ss->ss_family == AF_INET) {
    struct sockaddr_in *s = (struct sockaddr_in *)ss;
    inet_ntop(AF_INET, &s->sin_addr, p->info.address, sizeof p->info.address);
    p->info.port = ntohs(s->sin_port);
    return 1;
  }
  p->dst_len = sizeof *ss;
  if (getsockopt(p->client, SOL_IPV6, IP6T_SO_ORIGINAL_DST, ss, &p->dst_len) == 0 &&
      ss->ss_family == AF_INET6) {
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
    inet_ntop(AF_INET6, &s->sin6_addr, p->info.address, sizeof p->info.address);
    p->info.port = ntohs(s->sin6_port);
    return 1;
  }
  return 0;
}

void fast_link_pending(struct relay *r, struct pending *p) {
  p->next = r->fast->pending;
  if (p->next != NULL) p->next->prev = p;
  r->fast->pending = p;
}

void fast_unlink_pending(struct fast *f, struct pending *p) {
  if (p->prev != NULL) p->prev->next = p->next;
  else if (f->pending == p) f->pending = p->next;
  if (p->next != NULL) p->next->prev = p->prev;
  p->prev = p->next = NULL;
}

void fast_post(struct relay *r, struct report *info, int kind) {
  struct report *rep = malloc(sizeof *rep);
  if (rep == NULL) return;
  *rep = *info;
  rep->kind = kind;
  relay_post(r, rep);
}

// To JavaScript: the accepted descriptor, its bytes unread. `over`: the bound refused it (no slot).
static void hand(struct relay *r, int fd, int over) {
  struct report rep = {.fd = fd, .over = over};
  fast_post(r, &rep, REPORT_HANDED);
}

void fast_hand_pending(struct relay *r, struct pending *p) {
  epoll_ctl(r->epfd, EPOLL_CTL_DEL, p->client, NULL);
  if (p->upstream >= 0) close(p->upstream);
  fast_unlink_pending(r->fast, p);
  hand(r, p->client, 0);
  free(p);
}

static void release_slot(struct relay *r) {
  pthread_mutex_lock(&r->mu);
  r->slots--;
  pthread_mutex_unlock(&r->mu);
}

void fast_dial_failed(struct relay *r, struct pending *p, int err) {
  if (p->http) {
    // Nothing was sent: JavaScript reads the request, dials itself and answers its own 502.
    fast_hand_pending(r, p);
    return;
  }
  if (p->connect) connect_dial_failed(p);
  close(p->client);
  close(p->upstream);
  fast_unlink_pending(r->fast, p);
  release_slot(r);
  p->info.err = err;
  fast_post(r, &p->info, REPORT_FAILED);
  free(p);
}

// The dial ended: an error, or (connected) the connection joins the relay — for a CONNECT, once the
// tunnel's ClientHello names its name (fast-connect.c).
static void dialled(struct relay *r, struct pending *p) {
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(p->upstream, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    fast_dial_failed(r, p, err);
    return;
  }
  epoll_ctl(r->epfd, EPOLL_CTL_DEL, p->upstream, NULL);
  p->dialling = 0;
  if (p->http) http_dialled(r, p);
  else if (p->connect) connect_dialled(r, p);
  else fast_start_relay(r, p);
}

// The connection joins the relay, unless the table changed since it was decided (then Node decides it
// by the new rules; nothing was sent yet, its ClientHello still waits unread; a CONNECT's tunnel goes
// to Node as it stands).
void fast_start_relay(struct relay *r, struct pending *p) {
  int err = 0;
  struct conn *c = conn_new(p->client, p->upstream, &err);
  if (c == NULL) {
    fast_dial_failed(r, p, err);
    return;
  }
  pthread_mutex_lock(&r->mu);
  int current = p->version == r->fast->table.version && !r->fast->stopping;
  if (current) {
    c->slot = 1;
    conn_link_locked(r, c);
    p->info.id = c->id;
  }
  pthread_mutex_unlock(&r->mu);
  if (!current) {
    conn_free(c); // the pipes only: the client goes to Node, the upstream is closed (kept: CONNECT)
    if (p->connect) connect_hand_tunnel(r, p);
    else fast_hand_pending(r, p);
    return;
  }
  fast_unlink_pending(r->fast, p);
  fast_post(r, &p->info, REPORT_STARTED); // before any end report: one queue, in order
  update_masks(r, c);
  free(p);
}

// A plain-HTTP head's name, from its Host (fast-http.c); 0: not one this path takes.
static int http_name(struct pending *p, const uint8_t *buf, size_t n) {
  if ((p->head_len = http_origin_head((const char *)buf, n, &p->request)) == 0) return 0;
  p->http = 1;
  snprintf(p->info.name, sizeof p->info.name, "%s", p->request.name);
  snprintf(p->info.method, sizeof p->info.method, "%s", p->request.method);
  return 1;
}

// The first bytes are (or are not yet) there: a ClientHello's server name or a plain-HTTP head's Host,
// decided from the table (the entry of its own kind), dialled, or handed to Node.
static void peek(struct relay *r, struct pending *p) {
  uint8_t buf[PEEK_BYTES];
  ssize_t n = recv(p->client, buf, sizeof buf, MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  int named = n > 0 && (buf[0] == 0x16 ? server_name(buf, (size_t)n, p->info.name, sizeof p->info.name)
                                        : http_name(p, buf, (size_t)n));
  if (!named) {
    fast_hand_pending(r, p);
    return;
  }
  pthread_mutex_lock(&r->mu);
  int known = table_has(&r->fast->table, p->info.name, p->info.address, p->info.port,
                        p->http ? ENTRY_TRANSPARENT_HTTP : ENTRY_TRANSPARENT);
  p->version = r->fast->table.version;
  pthread_mutex_unlock(&r->mu);
  if (!known) {
    fast_hand_pending(r, p);
    return;
  }
  fast_dial(r, p);
}

void fast_dial(struct relay *r, struct pending *p) {
  p->upstream = socket(p->dst.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (p->upstream < 0) {
    fast_hand_pending(r, p);
    return;
  }
  int one = 1;
  setsockopt(p->upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  epoll_ctl(r->epfd, EPOLL_CTL_DEL, p->client, NULL);
  p->dialling = 1;
  p->deadline = now_ms(CLOCK_MONOTONIC) + DIAL_MS;
  if (connect(p->upstream, (struct sockaddr *)&p->dst, p->dst_len) == 0) {
    dialled(r, p);
    return;
  }
  if (errno != EINPROGRESS) {
    fast_dial_failed(r, p, errno);
    return;
  }
  struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = p};
  epoll_ctl(r->epfd, EPOLL_CTL_ADD, p->upstream, &ev);
}

static void accepted(struct relay *r, int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  pthread_mutex_lock(&r->mu);
  int admitted = r->slots < r->max_slots;
  if (admitted) r->slots++;
  int any = r->fast->table.entries > 0;
  pthread_mutex_unlock(&r->mu);
  if (!admitted) {
    hand(r, fd, 1);
    return;
  }
  if (!any) {
    hand(r, fd, 0);
    return;
  }
  struct pending *p = calloc(1, sizeof *p);
  if (p == NULL) {
    hand(r, fd, 0);
    return;
  }
  p->kind = KIND_PENDING;
  p->client = fd;
  p->upstream = -1;
  p->info.started = (double)now_ms(CLOCK_REALTIME);
  fast_link_pending(r, p);
  // Only a redirected connection to an address and port with entries waits for its first bytes here.
  int proxy = 0;
  if (original_destination(p)) {
    proxy = p->info.port == PROXY_PORT &&
            (strcmp(p->info.address, "127.0.0.1") == 0 || strcmp(p->info.address, "::1") == 0);
  }
  if (proxy) {
    if (!connect_take(r, p)) fast_hand_pending(r, p);
    return;
  }
  pthread_mutex_lock(&r->mu);
  int worth = p->info.address[0] != 0 && !proxy &&
              table_has(&r->fast->table, NULL, p->info.address, p->info.port, ENTRY_REDIRECTED);
  pthread_mutex_unlock(&r->mu);
  if (!worth) {
    fast_hand_pending(r, p);
    return;
  }
  p->deadline = now_ms(CLOCK_MONOTONIC) + PEEK_MS;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = p};
  epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev);
  peek(r, p); // the ClientHello is often there already
}

void fast_event(struct relay *r, void *ptr, uint32_t events) {
  if (*(int *)ptr == KIND_LISTENER) {
    struct listener *l = ptr;
    for (int i = 0; i < 64; i++) {
      int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) accepted(r, fd);
      else if (errno != ECONNABORTED && errno != EINTR) break; // EAGAIN; EMFILE: at the next turn
    }
    return;
  }
  struct pending *p = ptr;
  if (p->dialling) dialled(r, p);
  else if (p->connect) connect_event(r, p, events);
  else if (events & (EPOLLERR | EPOLLHUP)) fast_hand_pending(r, p);
  else peek(r, p);
}

void fast_on_wake(struct relay *r) {
  struct fast *f = __atomic_load_n(&r->fast, __ATOMIC_ACQUIRE);
  if (f == NULL) return;
  pthread_mutex_lock(&r->mu);
  struct listener *ls = f->stopping ? f->listeners : NULL;
  if (f->stopping) f->listeners = NULL;
  pthread_mutex_unlock(&r->mu);
  for (struct listener *l = ls, *next; l != NULL; l = next) {
    next = l->next;
    close(l->fd); // closing removes it from the epoll set
    free(l);
  }
}

int fast_timeout_ms(struct relay *r) {
  struct fast *f = __atomic_load_n(&r->fast, __ATOMIC_ACQUIRE);
  if (f == NULL || f->pending == NULL) return -1;
  int64_t first = INT64_MAX, now = now_ms(CLOCK_MONOTONIC);
  for (struct pending *p = f->pending; p != NULL; p = p->next)
    if (p->deadline < first) first = p->deadline;
  return first <= now ? 0 : (int)(first - now + 1);
}

void fast_tick(struct relay *r) {
  struct fast *f = __atomic_load_n(&r->fast, __ATOMIC_ACQUIRE);
  if (f == NULL) return;
  int64_t now = now_ms(CLOCK_MONOTONIC);
  for (struct pending *p = f->pending, *next; p != NULL; p = next) {
    next = p->next;
    if (p->deadline > now) continue;
    if (p->dialling) fast_dial_failed(r, p, ETIMEDOUT);
    else if (p->connect) connect_expired(r, p);
    else fast_hand_pending(r, p); // no first bytes in time: Node reads (or dials) as it does for any
  }
}
