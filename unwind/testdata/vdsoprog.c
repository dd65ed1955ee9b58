/* Test program for the unwinder: a thread that calls clock_gettime (in the
 * vDSO) without end, so that a capture often finds it inside the vDSO;
 * the main thread prints "ready" and then answers each line on stdin with
 * "pong <line>".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;

static void *spin(void *arg) {
	(void)arg;
	struct timespec ts;
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		sink += ts.tv_nsec;
	}
	return NULL;
}

int main(void) {
	pthread_t t;
	pthread_create(&t, NULL, spin, NULL);
	printf("ready\n");
	fflush(stdout);
	char buf[256], reply[300];
	ssize_t n;
	while ((n = read(0, buf, sizeof buf)) > 0) {
		int m = snprintf(reply, sizeof reply, "pong %.*s", (int)n, buf);
		write(1, reply, m);
	}
	return 0;
}
