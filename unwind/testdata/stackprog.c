/* Test program for the unwinder: threads blocked at known depths.
 *
 *   worker0..2  recurse(3+i) then block in pause()      ("depthN" threads)
 *   deep        recurse(DEEP) then block in pause()
 *   sig         raises SIGUSR1; the handler blocks in read() on a pipe
 *   sort        qsort() whose comparator blocks in pause() on its first call
 *   main        prints "ready" once every thread is about to block, then
 *               answers each line on stdin with "pong <line>".
 *
 * Build: gcc -Wa,--gsframe -pthread [-O2 -fomit-frame-pointer | -O0
 * -fno-omit-frame-pointer] stackprog.c. Options: argv[1] = number of deep
 * threads (default 1), argv[2] = their depth (default 300).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_barrier_t bar;
static int sigpipe[2];
static volatile int sink;

__attribute__((noinline)) void block_here(void) {
	for (;;) pause();
}

__attribute__((noinline)) int recurse(int n) {
	if (n > 0) {
		int r = recurse(n - 1);
		sink += r;
		return r + 1;
	}
	pthread_barrier_wait(&bar);
	block_here();
	return 0;
}

static void *worker(void *arg) {
	long i = (long)arg;
	char name[16];
	snprintf(name, sizeof name, "depth%ld", 3 + i);
	pthread_setname_np(pthread_self(), name);
	recurse(3 + (int)i);
	return NULL;
}

static int deep_depth = 300;

static void *deep(void *arg) {
	char name[16];
	snprintf(name, sizeof name, "deep%ld", (long)arg);
	pthread_setname_np(pthread_self(), name);
	recurse(deep_depth);
	return NULL;
}

__attribute__((noinline)) void on_signal(int sig) {
	char c;
	(void)sig;
	pthread_barrier_wait(&bar);
	for (;;) {
		if (read(sigpipe[0], &c, 1) == 1) break;
	}
	sink++;
}

__attribute__((noinline)) void send_signal(void) {
	raise(SIGUSR1);
	sink++;
}

static void *sigthread(void *arg) {
	(void)arg;
	pthread_setname_np(pthread_self(), "sig");
	send_signal();
	return NULL;
}

static int first = 1;

__attribute__((noinline)) int compare(const void *a, const void *b) {
	if (first) {
		first = 0;
		pthread_barrier_wait(&bar);
		block_here();
	}
	return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) void do_sort(void) {
	int v[64];
	for (int i = 0; i < 64; i++) v[i] = (i * 37) % 64;
	qsort(v, 64, sizeof v[0], compare);
	sink += v[0];
}

static void *sortthread(void *arg) {
	(void)arg;
	pthread_setname_np(pthread_self(), "sort");
	do_sort();
	return NULL;
}

int main(int argc, char **argv) {
	int ndeep = argc > 1 ? atoi(argv[1]) : 1;
	if (argc > 2) deep_depth = atoi(argv[2]);
	pthread_t t;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	if (pipe(sigpipe) != 0) return 1;
	pthread_barrier_init(&bar, NULL, 3 + ndeep + 2 + 1);
	for (long i = 0; i < 3; i++) pthread_create(&t, NULL, worker, (void *)i);
	for (long i = 0; i < ndeep; i++) pthread_create(&t, NULL, deep, (void *)i);
	pthread_create(&t, NULL, sigthread, NULL);
	pthread_create(&t, NULL, sortthread, NULL);
	pthread_barrier_wait(&bar);
	printf("ready\n");
	fflush(stdout);
	char buf[256];
	ssize_t n;
	while ((n = read(0, buf, sizeof buf)) > 0) {
		char reply[300];
		int m = snprintf(reply, sizeof reply, "pong %.*s", (int)n, buf);
		if (write(1, reply, m) != m) return 1;
	}
	return 0;
}
