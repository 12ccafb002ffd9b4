// The set-up floor of any relay on this machine (bench/floor.js builds it with cc into the bench's
// temporary directory): accept, connect to the destination with TCP_NODELAY on both legs, then copy
// bytes both ways, a thread per connection. No parsing, no policy, no Node: what one more process between
// a client and its server costs a new connection here (the scheduler's wake-ups), nothing else.
//   floor-relay DEST_ADDRESS DEST_PORT  (prints its own 127.0.0.1 port, then serves until killed)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static struct sockaddr_in dest;

static void *carry(void *arg) {
  int client = (int)(long)arg, one = 1;
  int upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (upstream >= 0 && connect(upstream, (struct sockaddr *)&dest, sizeof dest) == 0) {
    struct pollfd fds[2] = {{.fd = client, .events = POLLIN}, {.fd = upstream, .events = POLLIN}};
    char buf[65536];
    for (int open = 1; open && poll(fds, 2, -1) > 0;) {
      for (int i = 0; i < 2 && open; i++) {
        if (fds[i].revents == 0) continue;
        ssize_t n = read(fds[i].fd, buf, sizeof buf);
        open = n > 0 && write(fds[1 - i].fd, buf, (size_t)n) == n;
      }
    }
  }
  close(client);
  if (upstream >= 0) close(upstream);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  dest.sin_family = AF_INET;
  dest.sin_port = htons((uint16_t)atoi(argv[2]));
  if (inet_pton(AF_INET, argv[1], &dest.sin_addr) != 1) return 2;
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in self = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof self;
  if (bind(listener, (struct sockaddr *)&self, sizeof self) != 0 || listen(listener, 128) != 0 ||
      getsockname(listener, (struct sockaddr *)&self, &len) != 0) {
    perror("floor-relay");
    return 1;
  }
  printf("%d\n", ntohs(self.sin_port));
  fflush(stdout);
  for (;;) {
    int client = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (client < 0) continue;
    pthread_t thread;
    if (pthread_create(&thread, NULL, carry, (void *)(long)client) != 0) close(client);
    else pthread_detach(thread);
  }
}
