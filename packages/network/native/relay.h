// What the splice relay (relay.c) and its accept path (fast.c) share: one epoll thread per policy
// point, whose epoll entries are told apart by their first field (`kind`).
#ifndef AGENTFENSE_RELAY_H
#define AGENTFENSE_RELAY_H
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <node_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#define PIPE_SIZE (64 * 1024)
#define TURN_BUDGET (1024 * 1024)
#define MAX_EVENTS 128

// The first field of everything registered with the relay's epoll (data.ptr; NULL: the wake-up).
enum { KIND_END = 1, KIND_LISTENER, KIND_PENDING };

struct conn;
struct fast;

// One socket of a connection as epoll sees it (data.ptr).
struct end {
  int kind; // KIND_END
  struct conn *conn;
  int side; // 0: the sandbox's client, 1: the upstream
  int fd;
  uint32_t mask; // events registered (EPOLLIN/EPOLLOUT)
  int watched;   // registered with epoll
  int hup;       // EPOLLHUP seen: unregistered once nothing is wanted from it
};

// One direction: 0 client -> upstream (up), 1 upstream -> client (down).
struct dir {
  int pipe[2];
  size_t pending; // bytes in the pipe
  char *head;     // bytes Node had read before the hand-over, written first
  size_t head_len, head_off;
  uint64_t bytes; // delivered to the destination
  int eof;        // the source sent its FIN
  int shut;       // the destination was shut down for writing
};

struct conn {
  uint32_t id;
  struct end ends[2];
  struct dir dirs[2];
  int err;    // first error (errno), 0 for a clean end
  int killed; // close() asked for it (set under the mutex, read by the thread: atomic)
  int done;
  int slot; // accepted by fast.c: holds one of the sandbox's connection slots until it ends
  uint64_t turn;
  size_t budget[2];
  struct conn *prev, *next; // the open list (under the relay's mutex)
  struct conn *free_next;   // ended this turn, freed after it; or waiting to be registered
};

struct relay {
  int epfd;
  int wake; // eventfd: connections were added (or the accept path stops)
  pthread_t thread;
  pthread_mutex_t mu;
  struct conn *open;
  struct conn *incoming; // added, not yet registered with epoll (only the thread touches epoll masks)
  uint32_t next_id;
  uint32_t count;
  // The sandbox's connection bound, when fast.c accepts: every connection holds a slot (under mu).
  uint32_t slots, max_slots;
  napi_threadsafe_function on_end;
  napi_ref on_fast; // fast.c's reports to JavaScript (NULL until fastStart)
  struct fast *fast;
};

// What the thread reports to JavaScript, in order, through on_end.
// REPORT_TUNNEL: an explicit-proxy CONNECT answered 200 whose tunnel JavaScript decides from there
// (fast-connect.c): both connected sockets are JavaScript's.
// REPORT_HTTP: a plain-HTTP request (explicit-proxy or redirected) whose head was sent to its destination
// (fast-http.c): both connected sockets are JavaScript's, which carries the answer back.
enum { REPORT_END, REPORT_HANDED, REPORT_STARTED, REPORT_FAILED, REPORT_TUNNEL, REPORT_HTTP };
enum { VIA_TRANSPARENT, VIA_PROXY };
struct report {
  int kind;
  uint32_t id;
  uint64_t up, down;
  int err;
  int fd;       // REPORT_HANDED, REPORT_TUNNEL, REPORT_HTTP: the accepted connection, now JavaScript's
  int upstream; // REPORT_TUNNEL, REPORT_HTTP: its connected upstream
  char method[8]; // REPORT_HTTP: the request's method
  int over;     // REPORT_HANDED: refused by the bound (holds no slot)
  int via;      // VIA_*: how the connection reached the policy point (the audit's `via`)
  int port;
  double started; // ms since the epoch, at accept
  char name[256];
  char address[INET6_ADDRSTRLEN];
};

// relay.c
void relay_post(struct relay *r, struct report *rep);
struct conn *conn_new(int client_fd, int upstream_fd, int *err);
void conn_free(struct conn *c);
void conn_link_locked(struct relay *r, struct conn *c); // under r->mu: id, open list, count
void update_masks(struct relay *r, struct conn *c);
// fast.c
void fast_event(struct relay *r, void *ptr, uint32_t events);
void fast_on_wake(struct relay *r);
int fast_timeout_ms(struct relay *r); // -1: nothing waits
void fast_tick(struct relay *r);
void fast_call_js(napi_env env, struct relay *r, struct report *rep);
napi_status fast_register(napi_env env, napi_value exports);

#endif
