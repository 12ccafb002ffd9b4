// The explicit proxy's first plain-HTTP request on the relay's thread (fast-connect.c reads the head;
// src/fast-accept.ts switches it, fastHttp): a client of 127.0.0.1:3128 whose first bytes are one
// absolute-form GET or HEAD head without a body, naming a name:port JavaScript already allowed for
// plain HTTP (an HTTP entry of the table: the address it dialled), is dialled from here and the head,
// rebuilt as src/http-fast.ts upstreamHead rebuilds it, is sent to the destination. Then both sockets
// go to JavaScript (REPORT_HTTP), which decides the request again, carries the answer back, audits it
// and decides every later request of the connection itself (src/http-proxy.ts resumeRequest).
// Only heads whose meaning this parse and JavaScript's (parseSimpleRequest, then WHATWG URL) agree on
// are taken: anything unusual — a body, an upgrade, a path URL would normalise, a host URL would read
// as an address or spell differently — goes to JavaScript unread.
#include "fast.h"
#include <stdio.h>
#include <string.h>
#include <strings.h>

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

// `http://name[:port]/path`: the name as JavaScript's URL gives it (lower case; no final dot, which URL
// keeps and C would not), the port (80 by default), the origin-form path. 0: not taken.
static int absolute(const char *a, size_t len, char *name, size_t name_size, int *port, const char **path,
                    size_t *path_len) {
  static const char scheme[] = "http://";
  if (len < sizeof scheme - 1 || memcmp(a, scheme, sizeof scheme - 1) != 0) return 0;
  const char *p = a + sizeof scheme - 1, *end = a + len;
  size_t n = 0;
  while (p < end && *p != ':' && *p != '/') {
    int ch = lower((unsigned char)*p);
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-')) return 0;
    if (n + 1 >= name_size) return 0;
    name[n++] = (char)ch;
    p++;
  }
  if (n == 0 || n > 253 || name[n - 1] == '.') return 0;
  name[n] = 0;
  *port = 80;
  if (p < end && *p == ':') {
    int digits = 0, v = 0;
    for (p++; p < end && *p >= '0' && *p <= '9' && digits < 5; p++, digits++) v = v * 10 + (*p - '0');
    if (digits == 0 || v < 1 || v > 65535) return 0;
    *port = v;
  }
  if (p >= end || *p != '/') return 0;
  *path = p;
  *path_len = (size_t)(end - p);
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

size_t http_proxy_head(const char *b, size_t n, struct http_head *h) {
  size_t len = whole_head_len(b, n);
  if (len == 0) return 0;
  const char *stop = b + len;
  const char *eol = memmem(b, len, "\r\n", 2);
  if (eol == NULL) eol = stop;
  // The request line: `GET|HEAD SP absolute-URL SP HTTP/1.1`.
  size_t method_len = (size_t)(eol - b) > 4 && memcmp(b, "GET ", 4) == 0    ? 3
                      : (size_t)(eol - b) > 5 && memcmp(b, "HEAD ", 5) == 0 ? 4
                                                                          : 0;
  if (method_len == 0 || (size_t)(eol - b) < method_len + 1 + 9) return 0;
  if (memcmp(eol - 9, " HTTP/1.1", 9) != 0) return 0;
  const char *target = b + method_len + 1, *target_end = eol - 9;
  if (memchr(target, ' ', (size_t)(target_end - target)) != NULL) return 0;
  const char *path;
  size_t path_len;
  if (!absolute(target, (size_t)(target_end - target), h->name, sizeof h->name, &h->port, &path, &path_len))
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
    if (IS("host") && ++hosts > 1) return 0;
#undef IS
    if (hop_by_hop(line, key)) continue;
    if (!append(h->out, sizeof h->out, &at, line, key) || !append(h->out, sizeof h->out, &at, ": ", 2) ||
        !append(h->out, sizeof h->out, &at, v, (size_t)(v_end - v)) || !append(h->out, sizeof h->out, &at, "\r\n", 2))
      return 0;
  }
  if (!append(h->out, sizeof h->out, &at, "Connection: close\r\n\r\n", 21)) return 0;
  h->out_len = at;
  return n;
}
