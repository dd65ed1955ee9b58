/* Test program for package targets: three named worker threads recurse to
 * depths 3, 4 and 5 in worker_recurse and block in pause(); the main thread
 * prints "ready" and then answers every line read on stdin with
 * "pong <line>".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static pthread_barrier_t bar;

__attribute__((noinline)) void worker_block(void) {
	for (;;) pause();
}

__attribute__((noinline)) int worker_recurse(int n) {
	if (n > 0) return worker_recurse(n - 1) + 1;
	pthread_barrier_wait(&bar);
	worker_block();
	return 0;
}

static void *worker(void *arg) {
	long i = (long)arg;
	char name[16];
	snprintf(name, sizeof name, "worker%ld", i);
	pthread_setname_np(pthread_self(), name);
	worker_recurse(3 + (int)i);
	return NULL;
}

int main(void) {
	pthread_t t[3];
	pthread_barrier_init(&bar, NULL, 4);
	for (long i = 0; i < 3; i++) pthread_create(&t[i], NULL, worker, (void *)i);
	pthread_barrier_wait(&bar);
	printf("ready\n");
	fflush(stdout);
	char buf[256];
	ssize_t n;
	while ((n = read(0, buf, sizeof buf)) > 0) {
		char reply[300];
		int m = snprintf(reply, sizeof reply, "pong %.*s", (int)n, buf);
		write(1, reply, m);
	}
	return 0;
}
