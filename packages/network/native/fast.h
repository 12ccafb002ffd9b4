// What the C accept path's files share (fast.c: accept, peek, dial; fast-js.c: its JavaScript side):
// the state kept on the relay's thread, declared once so a second path on that thread (another kind of
// accepted connection) can use the same listeners, pending list and table.
#ifndef AGENTFENSE_FAST_H
#define AGENTFENSE_FAST_H
#include "relay.h" // first: it defines _GNU_SOURCE (accept4, splice) before any system header
#include "fast-table.h"
#include <sys/socket.h>

struct listener {
  int kind; // KIND_LISTENER
  int fd;
  struct listener *next;
};

// An accepted connection this thread is deciding: reading its ClientHello, then dialling.
struct pending {
  int kind; // KIND_PENDING
  int dialling;
  int client, upstream;
  int64_t deadline;
  uint32_t version; // of the table entry that allowed it
  struct sockaddr_storage dst;
  socklen_t dst_len;
  struct report info; // name, address, port, started
  struct pending *prev, *next;
};

struct fast {
  struct listener *listeners; // under r->mu
  struct pending *pending;    // the thread's alone
  struct table table;         // under r->mu
  int stopping;               // under r->mu
};

#endif
