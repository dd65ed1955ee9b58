/* workload: the program the perfdata tests record with perf.
 *
 * It burns CPU in a few nested functions on the main thread and on a
 * second thread, forks a child that execs itself (so the recording has
 * FORK, COMM with exec, MMAP2 of the new image and EXIT records), sleeps
 * briefly (context switches) and exits. The argument is the number of
 * milliseconds of work per thread, in the thread's CPU time: a recording
 * sampled on CPU time gets as many samples on a loaded machine as on an
 * idle one.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static unsigned long leaf(unsigned long x)
{
	for (int i = 0; i < 1000; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

__attribute__((noinline)) static unsigned long middle(unsigned long x)
{
	char buf[256];
	memset(buf, (int)x, sizeof buf);
	return leaf(x + buf[x % sizeof buf]);
}

__attribute__((noinline)) static void burn(double ms)
{
	double end = cpu_ms() + ms;
	unsigned long x = 1;
	/* A system call: read every 64 rounds, it stays a small share. */
	for (unsigned i = 0; i % 64 != 0 || cpu_ms() < end; i++) {
		x = middle(x);
		sink += x;
	}
}

static double work_ms;

static void *thread_main(void *arg)
{
	(void)arg;
	burn(work_ms);
	return NULL;
}

int main(int argc, char **argv)
{
	work_ms = argc > 1 ? atof(argv[1]) : 100;
	if (argc > 2 && strcmp(argv[2], "child") == 0) {
		burn(work_ms / 4);
		return 0;
	}
	pthread_t t;
	pthread_create(&t, NULL, thread_main, NULL);
	pid_t pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", argv[0], argv[1] ? argv[1] : "100", "child", (char *)NULL);
		_exit(127);
	}
	burn(work_ms / 2);
	struct timespec ts = {0, 2000000};
	nanosleep(&ts, NULL);
	burn(work_ms / 2);
	pthread_join(t, NULL);
	waitpid(pid, NULL, 0);
	return 0;
}
