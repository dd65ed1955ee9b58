/* Test program for package perfevent: threads running in known functions
 * for a sampling profiler to catch.
 *
 *   spin0, spin1  spinner() -> spin_a() -> spin_b() -> spin_c(), which spins
 *   main          prints "ready" once the spinners run, then answers one
 *                 line on stdin at a time:
 *     threads   "threads TID TID": the spinners' thread IDs
 *     spawn     starts another spinner ("late"): "spawned TID"
 *     fork      forks a child that spins in child_spin(): "forked PID"
 *     exec      forks a child that executes this program with argument
 *               "child" (it spins in child_spin()): "execed PID"
 *     sleeper   starts a thread ("sleeper") that sleeps 1 ms at a time in
 *               sleeper() -> sleep_a() -> sleep_b() -> nanosleep():
 *               "sleeper TID"
 *     other     "pong <line>"
 * Children die with this program (PR_SET_PDEATHSIG).
 *
 * Build: gcc -O1 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
 * -fno-optimize-sibling-calls -pthread spinprog.c: every function keeps a
 * frame record, so the tests can walk frame pointers through the stack a
 * sample copies.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
/* never set: it keeps gcc from seeing that the loops do not return, which
 * would let it drop their frames and the code after their calls. */
static volatile int stop;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int started_tid;

__attribute__((noinline)) void spin_c(void) {
	while (!stop) sink++;
}

__attribute__((noinline)) void spin_b(void) {
	spin_c();
	sink++;
}

__attribute__((noinline)) void spin_a(void) {
	spin_b();
	sink++;
}

__attribute__((noinline)) void sleep_b(void) {
	struct timespec ts = {0, 1000000};
	while (!stop) {
		nanosleep(&ts, NULL);
		sink++;
	}
}

__attribute__((noinline)) void sleep_a(void) {
	sleep_b();
	sink++;
}

__attribute__((noinline)) void child_spin(void) {
	while (!stop) sink++;
}

/* announce publishes the calling thread's ID to the waiting main thread. */
__attribute__((noinline)) static void announce(const char *name) {
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&mu);
	started_tid = (int)syscall(SYS_gettid);
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&mu);
}

static void *spinner(void *arg) {
	announce((const char *)arg);
	spin_a();
	return NULL;
}

static void *sleeper(void *arg) {
	announce((const char *)arg);
	sleep_a();
	return NULL;
}

/* start runs fn in a new thread named name and returns its thread ID. */
static int start(void *(*fn)(void *), const char *name) {
	pthread_t t;
	pthread_mutex_lock(&mu);
	started_tid = 0;
	if (pthread_create(&t, NULL, fn, (void *)name) != 0) exit(1);
	while (started_tid == 0) pthread_cond_wait(&cond, &mu);
	int tid = started_tid;
	pthread_mutex_unlock(&mu);
	return tid;
}

static const char *self;

static int child(int do_exec) {
	pid_t pid = fork();
	if (pid != 0) return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (do_exec) {
		execl(self, self, "child", (char *)NULL);
		_exit(127);
	}
	child_spin();
	_exit(0);
}

int main(int argc, char **argv) {
	self = argv[0];
	if (argc > 1 && strcmp(argv[1], "child") == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		child_spin();
		return 0;
	}
	int t0 = start(spinner, "spin0");
	int t1 = start(spinner, "spin1");
	printf("ready\n");
	fflush(stdout);
	char line[256];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (strcmp(line, "threads") == 0) printf("threads %d %d\n", t0, t1);
		else if (strcmp(line, "spawn") == 0) printf("spawned %d\n", start(spinner, "late"));
		else if (strcmp(line, "sleeper") == 0) printf("sleeper %d\n", start(sleeper, "sleeper"));
		else if (strcmp(line, "fork") == 0) printf("forked %d\n", child(0));
		else if (strcmp(line, "exec") == 0) printf("execed %d\n", child(1));
		else printf("pong %s\n", line);
		fflush(stdout);
	}
	return 0;
}
