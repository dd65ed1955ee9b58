/* Test program for package recorder: one thread, "deep", whose stack
 * alternates between two depths, so that a small stack copy holds some
 * of its walks whole and cuts others short.
 *
 *   deep SECONDS   thread "deep" spins, over and over, for about a
 *                  millisecond at the bottom of a chain of 8 calls of
 *                  down(), then of DEEP (160 unless built with -DDEEP=N;
 *                  each frame about 80 bytes, so about 13 KB of stack)
 *
 * It prints "ready" once the thread runs, and exits after SECONDS.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa))

#ifndef DEEP
#define DEEP 160
#endif

static volatile unsigned long sink;

/* down keeps a frame of its own (the buffer) and calls itself depth
 * times, then spins. */
NOIPA void down(int depth) {
	volatile char pad[64];
	pad[0] = (char)depth;
	if (depth > 0) {
		down(depth - 1);
	} else {
		for (volatile unsigned long i = 0; i < 300000; i++) {
		}
	}
	sink += pad[0];
}

static void *deep(void *arg) {
	(void)arg;
	prctl(PR_SET_NAME, "deep");
	for (;;) {
		down(8);
		down(DEEP);
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: deep SECONDS\n");
		return 2;
	}
	pthread_t t;
	pthread_create(&t, NULL, deep, NULL);
	printf("ready\n");
	fflush(stdout);
	sleep(atoi(argv[1]));
	return 0;
}
