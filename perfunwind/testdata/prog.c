/* prog: the program the perfunwind tests record with perf record
 * --call-graph dwarf and unwind, compared with perf script.
 *
 * It spends its time in stacks of different shapes: recursion with
 * frames of several sizes, calls through function pointers, a callback
 * under libc's qsort (libc frames between two of the program's), libc
 * leaves (memcpy, strlen), the vDSO (clock_gettime), a function that
 * realigns its stack (DRAP on x86-64), a function with a variable-length
 * array, a SIGPROF handler that interrupts all of them (signal frames), and
 * a second thread. The argument is the number of milliseconds of CPU
 * time each of its two threads runs for: CPU time, not wall time, so that
 * a recording sampled on CPU time (perf record -e cpu-clock -c N) gets as
 * many samples on a loaded machine as on an idle one.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* cpu_ms is the CPU time of the calling thread (a system call: the vDSO
 * serves only the wall clocks). */
static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static unsigned long spin(unsigned long x, int n)
{
	for (int i = 0; i < n; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

__attribute__((noinline)) static unsigned long copy(unsigned long x)
{
	char a[512], b[512];
	memset(a, (int)x, sizeof a);
	memcpy(b, a, sizeof b);
	b[511] = 0;
	return x + strlen(b + (x & 63));
}

static int cmp(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	sink += spin(x, 20);
	return x < y ? -1 : x > y;
}

__attribute__((noinline)) static unsigned long sort(unsigned long x)
{
	unsigned long v[64];
	for (int i = 0; i < 64; i++)
		v[i] = spin(x + i, 3);
	qsort(v, 64, sizeof v[0], cmp);
	return v[x & 63];
}

__attribute__((noinline)) static unsigned long aligned(unsigned long x)
{
	/* A 64-byte aligned local makes gcc realign the stack. */
	unsigned long buf[8] __attribute__((aligned(64)));
	for (int i = 0; i < 8; i++)
		buf[i] = spin(x + i, 50);
	return buf[x & 7];
}

__attribute__((noinline)) static unsigned long vla(unsigned long x, int n)
{
	unsigned long v[n];
	for (int i = 0; i < n; i++)
		v[i] = spin(x ^ i, 40);
	return v[x % n];
}

__attribute__((noinline)) static unsigned long timed(unsigned long x)
{
	return x + (unsigned long)now_ms();
}

typedef unsigned long (*op)(unsigned long);
static op ops[] = {copy, sort, aligned, timed};

__attribute__((noinline)) static unsigned long rec(unsigned long x, int depth)
{
	volatile char pad[16 * (depth % 4)];
	if (depth % 4)
		pad[0] = (char)x;
	if (depth == 0)
		return ops[x % 4](x) + vla(x, 1 + (int)(x % 7));
	return rec(spin(x, 100), depth - 1) + 1;
}

__attribute__((noinline)) static void work(double ms, unsigned long seed)
{
	double end = cpu_ms() + ms;
	unsigned long x = seed;
	/* The clock is read every 64 calls: its system call stays a small
	 * share of the samples. */
	for (unsigned i = 0;; i++) {
		if (i % 64 == 0 && cpu_ms() >= end)
			break;
		x = rec(x, 1 + (int)(x % 12));
		sink += x;
	}
}

static void on_prof(int sig)
{
	(void)sig;
	sink += spin(sink, 20000);
}

static double work_ms;

static void *thread_main(void *arg)
{
	work(work_ms, (unsigned long)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	work_ms = argc > 1 ? atof(argv[1]) : 100;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_prof;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	struct itimerval it = {{0, 5000}, {0, 5000}};
	setitimer(ITIMER_PROF, &it, NULL);
	pthread_t t;
	pthread_create(&t, NULL, thread_main, (void *)7);
	work(work_ms, 1);
	pthread_join(t, NULL);
	printf("%lu\n", sink);
	return 0;
}
