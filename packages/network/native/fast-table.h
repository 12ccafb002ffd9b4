// The C accept path's decision table and ClientHello reader (fast-table.c), used by fast.c under the
// relay's mutex.
#ifndef AGENTFENSE_FAST_TABLE_H
#define AGENTFENSE_FAST_TABLE_H
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define TABLE_BUCKETS 1024
#define TABLE_MAX_ENTRIES 4096

struct entry;

// Decisions JavaScript made (name at address:port allowed, until a time). A transparent entry (TLS or
// plain HTTP) is bucketed by address and port (the connection names its address); a CONNECT or
// explicit-proxy HTTP entry by name and port (the request names its name, and the entry gives the
// address to dial).
struct table {
  struct entry *buckets[TABLE_BUCKETS];
  uint32_t entries;
  uint32_t connects; // how many of them are explicit-proxy entries (CONNECT or plain HTTP)
  uint32_t version; // bumped by every clear: a connection decided under an older one is not relayed
};

int64_t now_ms(clockid_t clock);
// Forgets every entry and bumps the version.
void table_clear(struct table *t);
// What an entry is: a redirected TLS connection or plain-HTTP request (looked up by table_has with that
// kind alone: the same name at the same address and port is decided apart for each), or an
// explicit-proxy CONNECT or plain-HTTP request (looked up by table_connect with that kind alone).
enum { ENTRY_TRANSPARENT, ENTRY_CONNECT, ENTRY_HTTP, ENTRY_TRANSPARENT_HTTP };
// table_has's kind: any redirected entry (TLS or plain HTTP) for the address and port.
#define ENTRY_REDIRECTED (-1)
// 0 when out of memory (not remembered: the next such connection takes the JavaScript path).
int table_put(struct table *t, const char *name, const char *address, int port, int64_t ttl_ms, int kind);
// Whether a live redirected entry of `kind` (ENTRY_TRANSPARENT, ENTRY_TRANSPARENT_HTTP,
// ENTRY_REDIRECTED: either) matches; name NULL: any entry for this address and port.
int table_has(const struct table *t, const char *name, const char *address, int port, int kind);
// The address a live entry of `kind` (ENTRY_CONNECT, ENTRY_HTTP) for exactly `name` and `port` holds,
// copied to `address`; 0: none.
int table_connect(const struct table *t, const char *name, int port, int kind, char *address, size_t address_size);
// The host name a ClientHello's SNI carries, as src/sniff.ts reads it; 0: not taken here.
int server_name(const uint8_t *b, size_t n, char *out, size_t out_size);

#endif
