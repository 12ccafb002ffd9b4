// The C accept path's decision table and ClientHello reader (fast-table.h). The table holds only what
// the JavaScript path decided allowed (src/fast-accept.ts remembers it), each entry for no longer than
// the name is known to be at the address; a lookup matches name, address and port exactly.
#define _GNU_SOURCE
#include "fast-table.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One decision JavaScript made: `name` at `address`:`port` allowed, the name known to be there until
// `until` (monotonic ms).
struct entry {
  char *name;
  char address[INET6_ADDRSTRLEN];
  int port;
  int kind; // ENTRY_*: CONNECT and HTTP entries are bucketed by name, never matched by table_has
  int64_t until;
  struct entry *next;
};

int64_t now_ms(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Entries are bucketed by their key (address, or name for CONNECT) and port, so "any entry here?" and
// the lookup read one bucket.
static uint32_t bucket_of(const char *key, int port) {
  uint32_t h = 2166136261u ^ (uint32_t)port;
  for (const char *p = key; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
  return h % TABLE_BUCKETS;
}

void table_clear(struct table *t) {
  for (int i = 0; i < TABLE_BUCKETS; i++) {
    for (struct entry *e = t->buckets[i], *next; e != NULL; e = next) {
      next = e->next;
      free(e->name);
      free(e);
    }
    t->buckets[i] = NULL;
  }
  t->entries = 0;
  t->connects = 0;
  t->version++;
}

int table_put(struct table *t, const char *name, const char *address, int port, int64_t ttl_ms, int kind) {
  struct entry *e = calloc(1, sizeof *e);
  if (e == NULL || (e->name = strdup(name)) == NULL) {
    free(e);
    return 0;
  }
  snprintf(e->address, sizeof e->address, "%s", address);
  e->port = port;
  e->kind = kind;
  e->until = now_ms(CLOCK_MONOTONIC) + ttl_ms;
  if (t->entries >= TABLE_MAX_ENTRIES) table_clear(t); // bounded: emptied when full
  int by_name = kind == ENTRY_CONNECT || kind == ENTRY_HTTP;
  uint32_t b = bucket_of(by_name ? e->name : address, port);
  e->next = t->buckets[b];
  t->buckets[b] = e;
  t->entries++;
  if (by_name) t->connects++;
  return 1;
}

int table_has(const struct table *t, const char *name, const char *address, int port, int kind) {
  int64_t now = now_ms(CLOCK_MONOTONIC);
  for (struct entry *e = t->buckets[bucket_of(address, port)]; e != NULL; e = e->next) {
    int redirected = e->kind == ENTRY_TRANSPARENT || e->kind == ENTRY_TRANSPARENT_HTTP;
    if ((kind == ENTRY_REDIRECTED ? redirected : e->kind == kind) && e->port == port && e->until > now && strcmp(e->address, address) == 0 &&
        (name == NULL || strcmp(e->name, name) == 0))
      return 1;
  }
  return 0;
}

int table_connect(const struct table *t, const char *name, int port, int kind, char *address, size_t address_size) {
  int64_t now = now_ms(CLOCK_MONOTONIC);
  for (struct entry *e = t->buckets[bucket_of(name, port)]; e != NULL; e = e->next) {
    if (e->kind == kind && e->port == port && e->until > now && strcmp(e->name, name) == 0) {
      snprintf(address, address_size, "%s", e->address);
      return 1;
    }
  }
  return 0;
}

// The name a ClientHello's SNI carries, read as src/sniff.ts reads it, or 0 when this path does not
// take it: anything but one whole ClientHello in the first record with a plain host name goes to Node.
int server_name(const uint8_t *b, size_t n, char *out, size_t out_size) {
  if (n < 5 || b[0] != 0x16) return 0;
  size_t record = ((size_t)b[3] << 8) | b[4];
  if (5 + record > n || record < 4 || b[5] != 0x01) return 0;
  const uint8_t *m = b + 9;
  size_t len = ((size_t)b[6] << 16) | ((size_t)b[7] << 8) | b[8];
  if (4 + len > record) return 0;
  size_t p = 2 + 32; // version, random
  if (p + 1 > len) return 0;
  p += 1 + m[p]; // session id
  if (p + 2 > len) return 0;
  p += 2 + (((size_t)m[p] << 8) | m[p + 1]); // cipher suites
  if (p + 1 > len) return 0;
  p += 1 + m[p]; // compression methods
  if (p + 2 > len) return 0;
  size_t end = p + 2 + (((size_t)m[p] << 8) | m[p + 1]);
  if (end > len) return 0;
  p += 2;
  while (p + 4 <= end) {
    size_t type = ((size_t)m[p] << 8) | m[p + 1], ext = ((size_t)m[p + 2] << 8) | m[p + 3];
    p += 4;
    if (p + ext > end) return 0;
    if (type != 0) {
      p += ext;
      continue;
    }
    for (size_t q = p + 2; q + 3 <= p + ext;) {
      size_t name_len = ((size_t)m[q + 1] << 8) | m[q + 2];
      if (q + 3 + name_len > p + ext) return 0;
      if (m[q] != 0) {
        q += 3 + name_len;
        continue;
      }
      // sniff.ts: trimmed, lower case, one final dot dropped, [a-z0-9._-]{1,253}. Here only names that
      // need no trimming: any other byte sends the connection to Node.
      if (name_len == 0 || name_len >= out_size) return 0;
      for (size_t i = 0; i < name_len; i++) {
        uint8_t ch = m[q + 3 + i];
        if (ch >= 'A' && ch <= 'Z') ch = (uint8_t)(ch - 'A' + 'a');
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
          return 0;
        out[i] = (char)ch;
      }
      if (out[name_len - 1] == '.') name_len--;
      if (name_len == 0 || name_len > 253) return 0;
      out[name_len] = 0;
      return 1;
    }
    return 0;
  }
  return 0;
}

