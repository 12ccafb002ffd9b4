// A process whose main thread exits alone while a second thread runs on (helpers/leaderless.ts): /proc
// then shows the group's leader as a zombie ("Z"), but the process lives. Static, so it runs in any image.
#include <pthread.h>
#include <unistd.h>

static void *sleeper(void *arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

int main(void) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, sleeper, NULL) != 0) return 1;
  // On the main thread: exit(2) of this thread only (not exit_group), the process carries on.
  pthread_exit(NULL);
}
