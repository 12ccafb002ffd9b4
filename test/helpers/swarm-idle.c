/* The swarm test's sandbox container: waits until stopped. A static binary is the whole image, so
   loading it into three engines takes milliseconds instead of the base image's seconds. */
#include <signal.h>
#include <unistd.h>

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

int main(void) {
  signal(SIGTERM, stop);
  signal(SIGINT, stop);
  for (;;) pause();
}
