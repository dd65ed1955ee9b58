/* Test program for cross-architecture cores: run under qemu-user, it
 * dumps core with its threads blocked at known places.
 *
 *   recurse  recurse(DEPTH) then blocks in read() on a pipe
 *   sig      raises SIGUSR1; the handler blocks in read()
 *   sort     qsort() whose comparator blocks in read() on its first call
 *   main     prints "module NAME ADDRESS" for each loaded object
 *            (dl_iterate_phdr: the name and load bias the dynamic linker
 *            has), waits until those threads sleep in the kernel, then
 *            calls crash(20): 20 calls deep, abort().
 *
 * Build with a cross compiler, static or dynamic, at any -O level, with
 * or without frame pointers; see internal/testprog/cross.go.
 */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DEPTH 30
#define NTHREADS 3

static int blockpipe[2];
static volatile int sink;
static int tids[NTHREADS];
static pthread_barrier_t bar;

__attribute__((noinline)) void block_here(int i) {
	char c;
	tids[i] = (int)syscall(SYS_gettid);
	for (;;) {
		if (read(blockpipe[0], &c, 1) == 1) break;
	}
	sink++;
}

__attribute__((noinline)) int recurse(int n) {
	if (n > 0) {
		int r = recurse(n - 1);
		sink += r;
		return r + 1;
	}
	block_here(0);
	return 0;
}

static void *recurse_thread(void *arg) {
	(void)arg;
	pthread_barrier_wait(&bar);
	recurse(DEPTH);
	return NULL;
}

__attribute__((noinline)) void on_signal(int sig) {
	(void)sig;
	block_here(1);
	sink++;
}

__attribute__((noinline)) void send_signal(void) {
	raise(SIGUSR1);
	sink++;
}

static void *sig_thread(void *arg) {
	(void)arg;
	pthread_barrier_wait(&bar);
	send_signal();
	return NULL;
}

static int first = 1;

__attribute__((noinline)) int compare(const void *a, const void *b) {
	if (first) {
		first = 0;
		block_here(2);
	}
	return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) void do_sort(void) {
	int v[64];
	for (int i = 0; i < 64; i++) v[i] = (i * 37) % 64;
	qsort(v, 64, sizeof v[0], compare);
	sink += v[0];
}

static void *sort_thread(void *arg) {
	(void)arg;
	pthread_barrier_wait(&bar);
	do_sort();
	return NULL;
}

/* sleeping reports whether thread tid sleeps in the kernel (state S in
 * /proc/self/task/TID/stat; under qemu-user, the host thread's state). */
static int sleeping(int tid) {
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
	FILE *f = fopen(path, "r");
	if (!f) return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] == 'S';
}

__attribute__((noinline)) void crash(int n) {
	if (n == 0) abort();
	crash(n - 1);
	sink++;
}

static int print_module(struct dl_phdr_info *info, size_t size, void *data) {
	(void)size;
	(void)data;
	printf("module %s %#lx\n", info->dlpi_name, (unsigned long)info->dlpi_addr);
	return 0;
}

int main(void) {
	pthread_t t;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	if (pipe(blockpipe) != 0) return 1;
	pthread_barrier_init(&bar, NULL, NTHREADS + 1);
	pthread_create(&t, NULL, recurse_thread, NULL);
	pthread_create(&t, NULL, sig_thread, NULL);
	pthread_create(&t, NULL, sort_thread, NULL);
	pthread_barrier_wait(&bar);
	dl_iterate_phdr(print_module, NULL);
	fflush(stdout);
	/* Wait until every thread is blocked twice in a row, 10ms apart. */
	for (int ok = 0; ok < 2;) {
		usleep(10000);
		int all = 1;
		for (int i = 0; i < NTHREADS; i++)
			all = all && tids[i] != 0 && sleeping(tids[i]);
		ok = all ? ok + 1 : 0;
	}
	crash(20);
	return 0;
}
