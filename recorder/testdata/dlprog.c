/* Test program for sframe record --bpf: code that comes after the
 * profiler started.
 *
 *   dlprog dlopen LIB SECONDS
 *                  after 300 ms, loads LIB (dllib.c) and starts thread
 *                  "dl", spinning in dl_thread() -> lib_spin() -> lib1()
 *                  -> lib2() (the last three in LIB); exits after
 *                  SECONDS
 *   dlprog reload LIB1 LIB2 SECONDS
 *                  loads LIB1 and spins 300 ms in thread "dl" in it,
 *                  stops it and unloads LIB1, then loads LIB2 (mapped
 *                  where LIB1 was, when it is no larger) and spins in
 *                  it in thread "dl2"; prints both load addresses;
 *                  exits after SECONDS
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
	pthread_setname_np(pthread_self(), arg ? (const char *)arg : "dl");
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
	if (argc >= 5 && strcmp(argv[1], "reload") == 0) {
		for (int i = 0; i < 2; i++) {
			void *h = dlopen(argv[2 + i], RTLD_NOW);
			void (*stop)(void) = 0;
			if (!h || !(lib_spin = (void (*)(void))dlsym(h, "lib_spin")) ||
			    !(stop = (void (*)(void))dlsym(h, "lib_stop"))) {
				fprintf(stderr, "dlprog: %s\n", dlerror());
				return 1;
			}
			Dl_info info;
			if (dladdr((void *)lib_spin, &info))
				printf("%p\n", info.dli_fbase);
			fflush(stdout);
			pthread_t t;
			pthread_create(&t, NULL, dl_thread, i ? "dl2" : NULL);
			if (i == 0) {
				spin(300);
				stop();
				pthread_join(t, NULL);
				dlclose(h);
			}
		}
		struct timespec ts = {atoi(argv[4]), 0};
		nanosleep(&ts, NULL);
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "exec") == 0) {
		spin(300);
		execv(argv[2], argv + 2);
		perror("dlprog: exec");
		return 1;
	}
	fprintf(stderr, "usage: dlprog dlopen LIB SECONDS | dlprog reload LIB1 LIB2 SECONDS | dlprog exec PROG ARGS...\n");
	return 2;
}
