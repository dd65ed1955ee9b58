// sigplt: the two frame shapes that the BPF walker's tables once left to
// frame pointers, each in a thread of its own, for SECONDS seconds
// (TestBPFSignalAndPLT):
//
//	sigloop: spins in sig_loop, interrupted every 1 ms of its CPU
//	time by SIGALRM (a timer of the thread's CPU clock, delivered to it
//	alone), whose handler on_signal spends a few milliseconds in sig_work:
//	samples in the handler are walked through the C library's signal
//	trampoline (__restore_rt) into the interrupted sig_loop.
//	pltloop: calls the C library's abs through the PLT in a loop
//	(built with -fno-builtin, so that the call is not inlined): samples
//	in the PLT stub.
//
// Build: gcc -O2 -fno-builtin -pthread [-Wa,--gsframe] -o sigplt sigplt.c
// Run:   ./sigplt SECONDS
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile long sink;
static volatile int stop;

__attribute__((noinline)) long sig_work(long n) {
	long s = 0;
	for (long i = 0; i < n; i++)
		s += sink ^ i;
	return s;
}

// on_signal adds sig_work's result after the call, so that the call is
// not a tail call: the handler keeps its frame.
__attribute__((noinline)) void on_signal(int sig) { sink += sig_work(3000000) + sig; }

__attribute__((noinline)) void sig_loop(void) {
	while (!stop)
		sink++;
}

static void *sig_thread(void *arg) {
	(void)arg;
	pthread_setname_np(pthread_self(), "sigloop");
	struct sigevent ev = {0};
	ev.sigev_notify = SIGEV_THREAD_ID;
	ev.sigev_signo = SIGALRM;
	ev._sigev_un._tid = gettid(); // sigev_notify_thread_id, which glibc 2.36 does not name
	timer_t t;
	if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &t) != 0)
		abort();
	struct itimerspec its = {{0, 1000000}, {0, 1000000}};
	if (timer_settime(t, 0, &its, 0) != 0)
		abort();
	sig_loop();
	return 0;
}

// plt_loop sums in a register: the stub is a larger share of the loop
// than with a store to sink in each iteration.
__attribute__((noinline)) void plt_loop(void) {
	long s = 0;
	for (int i = 0; !stop; i++)
		s += abs(i);
	sink = s;
}

static void *plt_thread(void *arg) {
	(void)arg;
	pthread_setname_np(pthread_self(), "pltloop");
	plt_loop();
	return 0;
}

int main(int argc, char **argv) {
	int secs = argc > 1 ? atoi(argv[1]) : 2;
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, 0);
	pthread_t a, b;
	pthread_create(&a, 0, sig_thread, 0);
	pthread_create(&b, 0, plt_thread, 0);
	sleep(secs);
	stop = 1;
	pthread_join(a, 0);
	pthread_join(b, 0);
	return 0;
}
