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

// An accepted connection this thread is deciding: reading its ClientHello, then dialling. A client of
// the explicit proxy (connect set, fast-connect.c) reads its CONNECT head, dials, answers 200, then
// reads the ClientHello inside the tunnel.
// A first plain-HTTP request this thread takes (fast-http.c), of the explicit proxy or redirected: its
// name, port (the URL's or Host's) and method, and the head to send to the destination.
#define HTTP_OUT_BYTES 4160
struct http_head {
  char name[256];
  int port;
  char method[8];
  char out[HTTP_OUT_BYTES];
  size_t out_len;
};

struct pending {
  int kind; // KIND_PENDING
  int dialling;
  int connect;     // a client of the explicit proxy
  int established; // connect: answered 200, waiting for the tunnel's ClientHello
  size_t head_len; // connect: the CONNECT head's bytes, still unread until the 200
  int http;        // the head is a plain-HTTP request (fast-http.c): of the explicit proxy (connect
                   // set) or of a redirected connection
  struct http_head request; // http: what is sent to the destination once it accepted
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

// fast.c, for fast-connect.c
void fast_post(struct relay *r, struct report *info, int kind);
void fast_link_pending(struct relay *r, struct pending *p);
void fast_unlink_pending(struct fast *f, struct pending *p);
void fast_hand_pending(struct relay *r, struct pending *p); // the client to JavaScript, unread
void fast_dial_failed(struct relay *r, struct pending *p, int err);
void fast_dial(struct relay *r, struct pending *p); // p->dst set: connects, then fast_dialled()
// Connected: the pair joins the relay (REPORT_STARTED), or goes back when the table changed since.
void fast_start_relay(struct relay *r, struct pending *p);

// fast-connect.c
// A client of the explicit proxy: 1 when this path took it (its CONNECT head is read here).
int connect_take(struct relay *r, struct pending *p);
void connect_event(struct relay *r, struct pending *p, uint32_t events);
void connect_dialled(struct relay *r, struct pending *p);
void connect_expired(struct relay *r, struct pending *p);
void connect_dial_failed(struct pending *p);  // answers 502, as the JavaScript path does
void connect_hand_tunnel(struct relay *r, struct pending *p); // REPORT_TUNNEL
// One whole request head, control bytes refused: its length without the blank line, 0 if not.
size_t whole_head_len(const char *b, size_t n);

// fast-http.c
// A plain-HTTP head longer than this goes to JavaScript.
#define HTTP_HEAD_BYTES 4096
// The length of one absolute-form GET/HEAD head that is all of `b`, taken apart into `h`; 0: not taken.
size_t http_proxy_head(const char *b, size_t n, struct http_head *h);
// The same for one origin-form head with one Host (a redirected connection's): `h->name` is the Host's.
size_t http_origin_head(const char *b, size_t n, struct http_head *h);
// Connected (p->http): sends the head, consumes it, hands both sockets to JavaScript (REPORT_HTTP).
void http_dialled(struct relay *r, struct pending *p);

#endif
