// The explicit proxy's CONNECT on the relay's thread (fast.c accepts; src/fast-accept.ts switches it,
// fastConnect): a client of 127.0.0.1:3128 whose first bytes are one plain CONNECT head naming a
// name:port JavaScript already allowed (a CONNECT entry of the table: the address it dialled, for as
// long as the resolver holds the name there) is dialled from here and answered 200; the tunnel's
// ClientHello is then read, and only when its server name is the CONNECT's name is the pair spliced.
// Anything else goes back to JavaScript's own CONNECT flow (src/http-proxy.ts), which decides it as it
// always does:
//   - before the 200 (an unusual head, no entry, a table change while dialling), the client alone, its
//     bytes unread (MSG_PEEK until then);
//   - after it (another or no server name inside the tunnel, a ClientHello not whole, no bytes in
//     time, a table change), the client and the connected upstream, the ClientHello unread
//     (REPORT_TUNNEL): JavaScript reads it and refuses or carries the tunnel exactly as after its own 200.
#include "fast.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/** A CONNECT head longer than this goes to JavaScript. */
#define HEAD_BYTES 4096
#define PEEK_BYTES 16384
/** How long a proxy client may take to send its CONNECT head, and its ClientHello after the 200. */
#define HEAD_MS 100
#define HELLO_MS 1000

static const char ESTABLISHED[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
static const char BAD_GATEWAY[] = "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

static int lower(int ch) {
  return ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
}

static int is_token(int ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         (ch != 0 && strchr("!#$%&'*+.^_`|~-", ch) != NULL);
}

// `CONNECT host[:port] HTTP/1.x`: the host spelt as src/http-proxy.ts splitHostPort reads it (lower
// case, one final dot dropped, 443 by default); only plain names ([a-z0-9._-], no IP literal
// brackets) are taken here. 0: not taken.
static int authority(const char *line, size_t len, char *name, size_t name_size, int *port) {
  static const char verb[] = "CONNECT ";
  if (len < sizeof verb - 1 || memcmp(line, verb, sizeof verb - 1) != 0) return 0;
  const char *a = line + sizeof verb - 1, *end = line + len;
  const char *space = memchr(a, ' ', (size_t)(end - a));
  if (space == NULL) return 0;
  size_t rest = (size_t)(end - space - 1);
  if (rest != 8 || (memcmp(space + 1, "HTTP/1.1", 8) != 0 && memcmp(space + 1, "HTTP/1.0", 8) != 0)) return 0;
  const char *colon = memchr(a, ':', (size_t)(space - a));
  const char *host_end = colon != NULL ? colon : space;
  size_t n = (size_t)(host_end - a);
  if (n == 0 || n >= name_size) return 0;
  for (size_t i = 0; i < n; i++) {
    int ch = lower((unsigned char)a[i]);
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-')) return 0;
    name[i] = (char)ch;
  }
  if (name[n - 1] == '.') n--;
  if (n == 0 || n > 253) return 0;
  name[n] = 0;
  *port = 443;
  if (colon != NULL) {
    size_t digits = (size_t)(space - colon - 1);
    if (digits == 0 || digits > 5) return 0;
    int p = 0;
    for (size_t i = 0; i < digits; i++) {
      if (colon[1 + i] < '0' || colon[1 + i] > '9') return 0;
      p = p * 10 + (colon[1 + i] - '0');
    }
    if (p < 1 || p > 65535) return 0;
    *port = p;
  }
  return 1;
}

// The length of one request head that is all of `b` (nothing pipelined after it), without its blank line;
// 0 when there is none or it holds a control byte besides tab and its line ends (fast-http.c shares it).
size_t whole_head_len(const char *b, size_t n) {
  const char *end = memmem(b, n, "\r\n\r\n", 4);
  if (end == NULL || (size_t)(end - b) + 4 != n) return 0;
  size_t len = (size_t)(end - b);
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)b[i];
    if (ch == '\r' && b[i + 1] == '\n') {
      i++;
      continue;
    }
    if ((ch < 0x20 && ch != '\t') || ch == 0x7f) return 0;
  }
  return len;
}

// The length of one CONNECT head that is all of `b` (nothing pipelined after it), its name and port;
// 0 when this path does not take it: what src/http-fast.ts connectAuthority refuses (control bytes, a
// header line without a token name), a Proxy-Authorization (JavaScript's to judge), or more bytes.
static size_t connect_head(const char *b, size_t n, char *name, size_t name_size, int *port) {
  size_t len = whole_head_len(b, n);
  if (len == 0) return 0;
  const char *line = b, *stop = b + len;
  const char *eol = memmem(line, (size_t)(stop - line), "\r\n", 2);
  if (eol == NULL) eol = stop;
  if (!authority(line, (size_t)(eol - line), name, name_size, port)) return 0;
  while (eol < stop) {
    line = eol + 2;
    eol = memmem(line, (size_t)(stop - line), "\r\n", 2);
    if (eol == NULL) eol = stop;
    const char *colon = memchr(line, ':', (size_t)(eol - line));
    if (colon == NULL || colon == line) return 0;
    for (const char *c = line; c < colon; c++)
      if (!is_token((unsigned char)*c)) return 0;
    if ((size_t)(colon - line) == 19 && strncasecmp(line, "proxy-authorization", 19) == 0) return 0;
  }
  return n;
}

// The address the entry holds, as the dial's sockaddr.
static int destination(struct pending *p, const char *address) {
  memset(&p->dst, 0, sizeof p->dst);
  struct sockaddr_in *v4 = (struct sockaddr_in *)&p->dst;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&p->dst;
  if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)p->info.port);
    p->dst_len = sizeof *v4;
  } else if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)p->info.port);
    p->dst_len = sizeof *v6;
  } else {
    return 0;
  }
  snprintf(p->info.address, sizeof p->info.address, "%s", address);
  return 1;
}

int connect_take(struct relay *r, struct pending *p) {
  pthread_mutex_lock(&r->mu);
  int any = r->fast->table.connects > 0;
  pthread_mutex_unlock(&r->mu);
  if (!any) return 0;
  p->connect = 1;
  p->info.via = VIA_PROXY;
  p->deadline = now_ms(CLOCK_MONOTONIC) + HEAD_MS;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = p};
  epoll_ctl(r->epfd, EPOLL_CTL_ADD, p->client, &ev);
  connect_event(r, p, 0); // the head is often there already
  return 1;
}

// The CONNECT head is (or is not yet) there: decide from the table, dial, or hand to Node.
static void head(struct relay *r, struct pending *p) {
  char buf[HEAD_BYTES];
  ssize_t n = recv(p->client, buf, sizeof buf, MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  char address[INET6_ADDRSTRLEN];
  int port = 0;
  p->head_len = n > 0 ? connect_head(buf, (size_t)n, p->info.name, sizeof p->info.name, &port) : 0;
  int kind = ENTRY_CONNECT;
  if (p->head_len == 0 && n > 0 && (p->head_len = http_proxy_head(buf, (size_t)n, &p->request)) > 0) {
    // A plain-HTTP request (fast-http.c): dialled by an HTTP entry, its head sent once connected.
    p->http = 1;
    kind = ENTRY_HTTP;
    port = p->request.port;
    snprintf(p->info.name, sizeof p->info.name, "%s", p->request.name);
    snprintf(p->info.method, sizeof p->info.method, "%s", p->request.method);
  }
  if (p->head_len == 0) {
    fast_hand_pending(r, p);
    return;
  }
  pthread_mutex_lock(&r->mu);
  int known = table_connect(&r->fast->table, p->info.name, port, kind, address, sizeof address);
  p->version = r->fast->table.version;
  pthread_mutex_unlock(&r->mu);
  p->info.port = port;
  if (!known || !destination(p, address)) {
    fast_hand_pending(r, p);
    return;
  }
  fast_dial(r, p);
}

// The tunnel's first bytes: a ClientHello for the CONNECT's own name is spliced; anything else (or a
// change of the table since) goes to JavaScript.
static void hello(struct relay *r, struct pending *p) {
  uint8_t buf[PEEK_BYTES];
  char sni[256];
  ssize_t n = recv(p->client, buf, sizeof buf, MSG_PEEK);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  epoll_ctl(r->epfd, EPOLL_CTL_DEL, p->client, NULL);
  if (n > 0 && server_name(buf, (size_t)n, sni, sizeof sni) && strcmp(sni, p->info.name) == 0) {
    fast_start_relay(r, p);
    return;
  }
  connect_hand_tunnel(r, p);
}

void connect_event(struct relay *r, struct pending *p, uint32_t events) {
  if (p->established) {
    hello(r, p);
    return;
  }
  if (events & (EPOLLERR | EPOLLHUP)) fast_hand_pending(r, p);
  else head(r, p);
}

// Connected: the head is consumed and answered 200, unless the table changed since it was decided (then
// Node decides the CONNECT by the new rules, its head still unread).
void connect_dialled(struct relay *r, struct pending *p) {
  if (p->http) {
    http_dialled(r, p);
    return;
  }
  pthread_mutex_lock(&r->mu);
  int current = p->version == r->fast->table.version && !r->fast->stopping;
  pthread_mutex_unlock(&r->mu);
  char buf[HEAD_BYTES];
  if (!current || recv(p->client, buf, p->head_len, 0) != (ssize_t)p->head_len) {
    fast_hand_pending(r, p); // a short read cannot happen: the head was there, whole, at the peek
    return;
  }
  p->established = 1;
  if (send(p->client, ESTABLISHED, sizeof ESTABLISHED - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof ESTABLISHED - 1)) {
    connect_hand_tunnel(r, p); // the client is gone (or its buffer full): Node sees it end
    return;
  }
  p->deadline = now_ms(CLOCK_MONOTONIC) + HELLO_MS;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = p};
  epoll_ctl(r->epfd, EPOLL_CTL_ADD, p->client, &ev);
}

void connect_expired(struct relay *r, struct pending *p) {
  epoll_ctl(r->epfd, EPOLL_CTL_DEL, p->client, NULL);
  if (p->established) connect_hand_tunnel(r, p);
  else fast_hand_pending(r, p);
}

// As src/http-proxy.ts answers a CONNECT whose destination did not accept: the head is consumed first.
void connect_dial_failed(struct pending *p) {
  if (p->established) return;
  char buf[HEAD_BYTES];
  if (recv(p->client, buf, p->head_len, MSG_DONTWAIT) == (ssize_t)p->head_len)
    send(p->client, BAD_GATEWAY, sizeof BAD_GATEWAY - 1, MSG_NOSIGNAL);
}

void connect_hand_tunnel(struct relay *r, struct pending *p) {
  fast_unlink_pending(r->fast, p);
  p->info.fd = p->client;
  p->info.upstream = p->upstream;
  fast_post(r, &p->info, REPORT_TUNNEL);
  free(p);
}
