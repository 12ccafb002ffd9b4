// Plain HTTP's first request on the relay's thread (src/fast-accept.ts switches it: fastHttp,
// fastTransparentHttp). Two ways in, one head parse:
//   - a client of the explicit proxy (127.0.0.1:3128; fast-connect.c reads the head) whose first bytes
//     are one absolute-form GET or HEAD head without a body, naming a name:port JavaScript already
//     allowed for plain HTTP (an HTTP entry of the table: the address it dialled), is dialled at that
//     address;
//   - a redirected connection (fast.c peeks) whose first bytes are one origin-form GET or HEAD head
//     without a body, whose Host names a name JavaScript already allowed at the DIALLED address and
//     port (a transparent-HTTP entry: the name checked to be at that address), is dialled at that
//     address.
// Once connected the head, rebuilt as src/http-fast.ts upstreamHead rebuilds it, is sent to the
// destination; then both sockets go to JavaScript (REPORT_HTTP), which decides the request again,
// carries the answer back, audits it and decides every later request of the connection itself
// (src/http-proxy.ts resumeRequest): a keep-alive connection may name another Host next.
// Only heads whose meaning this parse and JavaScript's (parseSimpleRequest, then WHATWG URL or
// splitHostPort) agree on are taken: anything unusual — a body, an upgrade, a path URL would normalise,
// a host that would read as an address or spell differently — goes to JavaScript unread.
#include "fast.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

static int lower(int ch) {
  return ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
}

static int is_token(int ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         (ch != 0 && strchr("!#$%&'*+.^_`|~-", ch) != NULL);
}

// Bytes of a path and query that WHATWG URL leaves as they are (no percent-encoding, no backslash).
static int is_path(int ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         (ch != 0 && strchr("-._~/?=&%+,;:@!$()*", ch) != NULL);
}

// A host name as JavaScript reads it (lower case; no final dot, which URL keeps and C would not; not a
// dotted-decimal address, which is no name): copied to `name`, the bytes read returned; 0: not taken.
static size_t host_name(const char *p, const char *end, char *name, size_t name_size) {
  size_t n = 0;
  int digits_and_dots = 1;
  while (p + n < end && p[n] != ':' && p[n] != '/') {
    int ch = lower((unsigned char)p[n]);
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-')) return 0;
    if (n + 1 >= name_size) return 0;
    if (!((ch >= '0' && ch <= '9') || ch == '.')) digits_and_dots = 0;
    name[n++] = (char)ch;
  }
  if (n == 0 || n > 253 || name[n - 1] == '.' || digits_and_dots) return 0;
  name[n] = 0;
  return n;
}

// `:port` (1-65535, at most five digits) or nothing: the port (`fallback` when none), the bytes read in
// `*used`; 0: not taken.
static int port_of(const char *p, const char *end, int fallback, size_t *used) {
  *used = 0;
  if (p >= end || *p != ':') return fallback;
  int digits = 0, v = 0;
  for (p++; p < end && *p >= '0' && *p <= '9' && digits < 5; p++, digits++) v = v * 10 + (*p - '0');
  if (digits == 0 || v < 1 || v > 65535) return 0;
  *used = (size_t)digits + 1;
  return v;
}

// An origin-form path and query both JavaScript paths send on as they are (no byte URL would
// percent-encode or read as a backslash, no dot segment URL would normalise). 0: not taken.
static int plain_path(const char *p, const char *end) {
  if (p >= end || *p != '/') return 0;
  int in_query = 0;
  for (const char *c = p; c < end; c++) {
    if (!is_path((unsigned char)*c)) return 0;
    if (*c == '?') in_query = 1;
    // Dot segments (`/.`, `%2e`) are normalised by URL: JavaScript's to read.
    if (!in_query && ((*c == '/' && c + 1 < end && c[1] == '.') ||
                      (*c == '%' && c + 2 < end && c[1] == '2' && lower((unsigned char)c[2]) == 'e')))
      return 0;
  }
  return 1;
}

// `http://name[:port]/path`: the name as JavaScript's URL gives it, the port (80 by default), the
// origin-form path. 0: not taken.
static int absolute(const char *a, size_t len, char *name, size_t name_size, int *port, const char **path,
                    size_t *path_len) {
  static const char scheme[] = "http://";
  if (len < sizeof scheme - 1 || memcmp(a, scheme, sizeof scheme - 1) != 0) return 0;
  const char *p = a + sizeof scheme - 1, *end = a + len;
  size_t n = host_name(p, end, name, name_size), used;
  if (n == 0) return 0;
  p += n;
  if ((*port = port_of(p, end, 80, &used)) == 0) return 0;
  p += used;
  if (!plain_path(p, end)) return 0;
  *path = p;
  *path_len = (size_t)(end - p);
  return 1;
}

// A Host value (trimmed) `name[:port]` as src/http-proxy.ts splitHostPort reads it: the name; the port
// is the dialled one's to decide, and only checked to be one. 0: not taken.
static int host_header(const char *v, const char *end, struct http_head *h) {
  size_t n = host_name(v, end, h->name, sizeof h->name), used;
  if (n == 0) return 0;
  h->port = port_of(v + n, end, 0, &used);
  return v + n + used == end && (used == 0 || h->port != 0);
}

static int append(char *out, size_t out_size, size_t *at, const char *s, size_t n) {
  if (*at + n > out_size) return 0;
  memcpy(out + *at, s, n);
  *at += n;
  return 1;
}

// Header names a proxy never passes on (src/http-fast.ts HOP_BY_HOP).
static int hop_by_hop(const char *name, size_t n) {
  static const char *const names[] = {"proxy-connection", "connection", "keep-alive", "te", "trailer"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strlen(names[i]) == n && strncasecmp(name, names[i], n) == 0) return 1;
  return 0;
}

// The head of `b` taken apart into `h`: absolute-form (the explicit proxy's; the name from the URL) or
// origin-form (a redirected connection's; the name from its one Host). 0: not taken.
static size_t simple_head(const char *b, size_t n, struct http_head *h, int origin) {
  if (n > HTTP_HEAD_BYTES) return 0;
  size_t len = whole_head_len(b, n);
  if (len == 0) return 0;
  const char *stop = b + len;
  const char *eol = memmem(b, len, "\r\n", 2);
  if (eol == NULL) eol = stop;
  // The request line: `GET|HEAD SP target SP HTTP/1.1`.
  size_t method_len = (size_t)(eol - b) > 4 && memcmp(b, "GET ", 4) == 0    ? 3
                      : (size_t)(eol - b) > 5 && memcmp(b, "HEAD ", 5) == 0 ? 4
                                                                          : 0;
  if (method_len == 0 || (size_t)(eol - b) < method_len + 1 + 9) return 0;
  if (memcmp(eol - 9, " HTTP/1.1", 9) != 0) return 0;
  const char *target = b + method_len + 1, *target_end = eol - 9;
  if (memchr(target, ' ', (size_t)(target_end - target)) != NULL) return 0;
  const char *path = target;
  size_t path_len = (size_t)(target_end - target);
  if (origin ? !plain_path(target, target_end)
             : !absolute(target, path_len, h->name, sizeof h->name, &h->port, &path, &path_len))
    return 0;
  memcpy(h->method, b, method_len);
  h->method[method_len] = 0;
  size_t at = 0;
  if (!append(h->out, sizeof h->out, &at, b, method_len + 1) || !append(h->out, sizeof h->out, &at, path, path_len) ||
      !append(h->out, sizeof h->out, &at, " HTTP/1.1\r\n", 11))
    return 0;
  int hosts = 0;
  while (eol < stop) {
    const char *line = eol + 2;
    eol = memmem(line, (size_t)(stop - line), "\r\n", 2);
    if (eol == NULL) eol = stop;
    const char *colon = memchr(line, ':', (size_t)(eol - line));
    if (colon == NULL || colon == line) return 0;
    for (const char *c = line; c < colon; c++)
      if (!is_token((unsigned char)*c)) return 0;
    size_t key = (size_t)(colon - line);
    const char *v = colon + 1, *v_end = eol;
    while (v < v_end && (*v == ' ' || *v == '\t')) v++;
    while (v_end > v && (v_end[-1] == ' ' || v_end[-1] == '\t')) v_end--;
    // JavaScript's trim() also takes a no-break space (0xa0 in latin1) off the ends: its to read.
    if (v < v_end && ((unsigned char)*v == 0xa0 || (unsigned char)v_end[-1] == 0xa0)) return 0;
#define IS(s) (key == sizeof s - 1 && strncasecmp(line, s, key) == 0)
    if (IS("transfer-encoding") || IS("upgrade") || IS("expect") || IS("proxy-authorization")) return 0;
    if (IS("content-length") && !(v_end - v == 1 && *v == '0')) return 0;
    if (IS("host") && (++hosts > 1 || (origin && !host_header(v, v_end, h)))) return 0;
#undef IS
    if (hop_by_hop(line, key)) continue;
    if (!append(h->out, sizeof h->out, &at, line, key) || !append(h->out, sizeof h->out, &at, ": ", 2) ||
        !append(h->out, sizeof h->out, &at, v, (size_t)(v_end - v)) || !append(h->out, sizeof h->out, &at, "\r\n", 2))
      return 0;
  }
  if (origin && hosts != 1) return 0; // no Host: JavaScript names it from the address
  if (!append(h->out, sizeof h->out, &at, "Connection: close\r\n\r\n", 21)) return 0;
  h->out_len = at;
  return n;
}

size_t http_proxy_head(const char *b, size_t n, struct http_head *h) {
  return simple_head(b, n, h, 0);
}

size_t http_origin_head(const char *b, size_t n, struct http_head *h) {
  return simple_head(b, n, h, 1);
}

// Connected for a plain-HTTP request: its rebuilt head goes to the destination, its own bytes are
// consumed, and both sockets go to JavaScript (REPORT_HTTP), which carries the answer. The head is sent
// under the mutex a policy change empties the table under: either the change comes first (the request
// goes to JavaScript unread, and is decided by the new rules) or the request left before it.
void http_dialled(struct relay *r, struct pending *p) {
  pthread_mutex_lock(&r->mu);
  int current = p->version == r->fast->table.version && !r->fast->stopping;
  ssize_t sent = current ? send(p->upstream, p->request.out, p->request.out_len, MSG_NOSIGNAL) : -1;
  pthread_mutex_unlock(&r->mu);
  char buf[HTTP_HEAD_BYTES];
  // A fresh connection's send buffer holds a head of at most 4 KiB whole; a short send cannot be
  // taken back, so that destination gets a cut request and JavaScript the client, its head unread.
  if (sent != (ssize_t)p->request.out_len) {
    fast_hand_pending(r, p);
    return;
  }
  if (p->head_len > sizeof buf || recv(p->client, buf, p->head_len, 0) != (ssize_t)p->head_len) {
    fast_hand_pending(r, p); // cannot happen: the head was there, whole and bounded, at the peek
    return;
  }
  fast_unlink_pending(r->fast, p);
  p->info.fd = p->client;
  p->info.upstream = p->upstream;
  fast_post(r, &p->info, REPORT_HTTP);
  free(p);
}
