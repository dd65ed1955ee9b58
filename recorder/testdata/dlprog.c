/* Test program for sframe record --bpf: code that comes after the
 * profiler started.
 *
 *   dlprog dlopen LIB SECONDS
 *                  after 300 ms, loads LIB (dllib.c) and starts thread
 *                  "dl", spinning in dl_thread() -> lib_spin() -> lib1()
 *                  -> lib2() (the last three in LIB); exits after
 *                  SECONDS
 *   dlprog exec PROG ARGS...
 *                  spins 300 ms, then executes PROG with ARGS (the same
 *                  process, a new program)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa))

static volatile unsigned long sink;

static long long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* spin runs for ms milliseconds of wall time. */
NOIPA static void spin(int ms) {
	long long end = now_ns() + ms * 1000000LL;
	while (now_ns() < end) sink++;
}

static void (*lib_spin)(void);

NOIPA void *dl_thread(void *arg) {
	pthread_setname_np(pthread_self(), "dl");
	lib_spin();
	sink++;
	return arg;
}

int main(int argc, char **argv) {
	if (argc >= 4 && strcmp(argv[1], "dlopen") == 0) {
		spin(300);
		void *h = dlopen(argv[2], RTLD_NOW);
		if (!h || !(lib_spin = (void (*)(void))dlsym(h, "lib_spin"))) {
			fprintf(stderr, "dlprog: %s\n", dlerror());
			return 1;
		}
		pthread_t t;
		pthread_create(&t, NULL, dl_thread, NULL);
		struct timespec ts = {atoi(argv[3]), 0};
		nanosleep(&ts, NULL);
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "exec") == 0) {
		spin(300);
		execv(argv[2], argv + 2);
		perror("dlprog: exec");
		return 1;
	}
	fprintf(stderr, "usage: dlprog dlopen LIB SECONDS | dlprog exec PROG ARGS...\n");
	return 2;
}
