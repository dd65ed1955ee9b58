/* Test program for package recorder: threads in known chains of
 * functions, for a live profiler to catch and unwind.
 *
 *   recprog spin SECONDS   threads "spin5", "spin20" and "spin60" spin in
 *                          chains of 5, 20 and 60 functions: spin5() ->
 *                          a1() -> ... -> a5(), spin20() -> b1() -> ... ->
 *                          b20(), spin60() -> c1() -> ... -> c60()
 *   recprog deep SECONDS   thread "spin32" spins in spin32() -> d1() ->
 *                          ... -> d29(): with start_thread and clone3, a
 *                          stack of 32 frames
 *   recprog recurse SECONDS [DEPTH]
 *                          thread "recurse" spins in recurse_spin() ->
 *                          rec() called DEPTH (2,000) times recursively
 *                          -> e1(): DEPTH+1 frames of the program, past
 *                          the 16 KiB stack copy of a user-space unwinder
 *   recprog sleep SECONDS  thread "sleeper" runs 1 ms of CPU in sleeper()
 *                          -> busy1() -> busy2() -> busy3(), then sleeps
 *                          9 ms in sleeper() -> nap1() -> nap2() -> nap3()
 *                          -> nanosleep(), over and over: 90% of its time
 *                          off the CPU; at exit it prints "napped F", F the
 *                          fraction of its time it spent in nap1()
 *   recprog work ITERATIONS
 *                          threads "work0" and "work1" each run d29()'s
 *                          loop ITERATIONS times, 32 frames deep as in
 *                          deep, then the program prints "elapsed S cpu
 *                          C sys K": the seconds the work took, and the
 *                          CPU and system seconds of the process (the
 *                          kernel takes samples in the program's time)
 *   recprog zero ITERATIONS
 *                          thread "reader" reads 16 KiB of /dev/zero
 *                          ITERATIONS times in reader() -> read1() ->
 *                          read2() -> read3() -> read(), nearly all of its
 *                          time in the kernel, then the program prints
 *                          "cpu C sys K": the thread's CPU and system
 *                          seconds
 *   recprog late SECONDS [auto]
 *                          on the line "spawn" on stdin (with "auto": 200
 *                          ms after start) starts thread "late", spinning
 *                          in late_spin() -> late1() -> late2() -> late3(),
 *                          then forks a child process, named "child", that
 *                          spins in child_spin() -> child1() -> child2() ->
 *                          child3(); answers "spawned PID"
 *
 * Each mode prints "ready" once its threads run; the process exits after
 * SECONDS (the child of "late" dies with it).
 *
 * Every function of the chains is noipa (not inlined, cloned or merged
 * with an identical one) and does something after its call, so that it
 * keeps its frame and the call stays a call. Build with -Wa,--gsframe for
 * SFrame, plain for CFI only, or with -fno-omit-frame-pointer
 * -mno-omit-leaf-frame-pointer -fno-asynchronous-unwind-tables for frame
 * pointers alone.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa))

static volatile unsigned long sink;
/* never set: it keeps gcc from seeing that the loops never end */
static volatile int stop;

/* the work of each thread in mode work, in steps of the SPIN loops */
static unsigned long limit = -1UL;

/* SPIN is the loop of the chains' last functions. Its counter on the
 * stack gives them a frame, and so a frame record with frame pointers:
 * gcc builds a leaf without a frame record when it uses no stack, even
 * with -mno-omit-leaf-frame-pointer, and then its caller is invisible to
 * a frame-pointer walk (as to perf record -g). It touches no shared
 * memory, so that threads do not slow each other down. */
#define SPIN(n)                                 \
	volatile unsigned long n_ = 0;            \
	while (!stop && n_ < limit) n_ += n;

NOIPA void a5(void) { SPIN(1); }
NOIPA void a4(void) { a5(); sink++; }
NOIPA void a3(void) { a4(); sink++; }
NOIPA void a2(void) { a3(); sink++; }
NOIPA void a1(void) { a2(); sink++; }

NOIPA void b20(void) { SPIN(2); }
NOIPA void b19(void) { b20(); sink++; }
NOIPA void b18(void) { b19(); sink++; }
NOIPA void b17(void) { b18(); sink++; }
NOIPA void b16(void) { b17(); sink++; }
NOIPA void b15(void) { b16(); sink++; }
NOIPA void b14(void) { b15(); sink++; }
NOIPA void b13(void) { b14(); sink++; }
NOIPA void b12(void) { b13(); sink++; }
NOIPA void b11(void) { b12(); sink++; }
NOIPA void b10(void) { b11(); sink++; }
NOIPA void b9(void) { b10(); sink++; }
NOIPA void b8(void) { b9(); sink++; }
NOIPA void b7(void) { b8(); sink++; }
NOIPA void b6(void) { b7(); sink++; }
NOIPA void b5(void) { b6(); sink++; }
NOIPA void b4(void) { b5(); sink++; }
NOIPA void b3(void) { b4(); sink++; }
NOIPA void b2(void) { b3(); sink++; }
NOIPA void b1(void) { b2(); sink++; }

NOIPA void c60(void) { SPIN(3); }
NOIPA void c59(void) { c60(); sink++; }
NOIPA void c58(void) { c59(); sink++; }
NOIPA void c57(void) { c58(); sink++; }
NOIPA void c56(void) { c57(); sink++; }
NOIPA void c55(void) { c56(); sink++; }
NOIPA void c54(void) { c55(); sink++; }
NOIPA void c53(void) { c54(); sink++; }
NOIPA void c52(void) { c53(); sink++; }
NOIPA void c51(void) { c52(); sink++; }
NOIPA void c50(void) { c51(); sink++; }
NOIPA void c49(void) { c50(); sink++; }
NOIPA void c48(void) { c49(); sink++; }
NOIPA void c47(void) { c48(); sink++; }
NOIPA void c46(void) { c47(); sink++; }
NOIPA void c45(void) { c46(); sink++; }
NOIPA void c44(void) { c45(); sink++; }
NOIPA void c43(void) { c44(); sink++; }
NOIPA void c42(void) { c43(); sink++; }
NOIPA void c41(void) { c42(); sink++; }
NOIPA void c40(void) { c41(); sink++; }
NOIPA void c39(void) { c40(); sink++; }
NOIPA void c38(void) { c39(); sink++; }
NOIPA void c37(void) { c38(); sink++; }
NOIPA void c36(void) { c37(); sink++; }
NOIPA void c35(void) { c36(); sink++; }
NOIPA void c34(void) { c35(); sink++; }
NOIPA void c33(void) { c34(); sink++; }
NOIPA void c32(void) { c33(); sink++; }
NOIPA void c31(void) { c32(); sink++; }
NOIPA void c30(void) { c31(); sink++; }
NOIPA void c29(void) { c30(); sink++; }
NOIPA void c28(void) { c29(); sink++; }
NOIPA void c27(void) { c28(); sink++; }
NOIPA void c26(void) { c27(); sink++; }
NOIPA void c25(void) { c26(); sink++; }
NOIPA void c24(void) { c25(); sink++; }
NOIPA void c23(void) { c24(); sink++; }
NOIPA void c22(void) { c23(); sink++; }
NOIPA void c21(void) { c22(); sink++; }
NOIPA void c20(void) { c21(); sink++; }
NOIPA void c19(void) { c20(); sink++; }
NOIPA void c18(void) { c19(); sink++; }
NOIPA void c17(void) { c18(); sink++; }
NOIPA void c16(void) { c17(); sink++; }
NOIPA void c15(void) { c16(); sink++; }
NOIPA void c14(void) { c15(); sink++; }
NOIPA void c13(void) { c14(); sink++; }
NOIPA void c12(void) { c13(); sink++; }
NOIPA void c11(void) { c12(); sink++; }
NOIPA void c10(void) { c11(); sink++; }
NOIPA void c9(void) { c10(); sink++; }
NOIPA void c8(void) { c9(); sink++; }
NOIPA void c7(void) { c8(); sink++; }
NOIPA void c6(void) { c7(); sink++; }
NOIPA void c5(void) { c6(); sink++; }
NOIPA void c4(void) { c5(); sink++; }
NOIPA void c3(void) { c4(); sink++; }
NOIPA void c2(void) { c3(); sink++; }
NOIPA void c1(void) { c2(); sink++; }

NOIPA void late3(void) { SPIN(4); }
NOIPA void late2(void) { late3(); sink++; }
NOIPA void late1(void) { late2(); sink++; }

NOIPA void child3(void) { SPIN(5); }
NOIPA void child2(void) { child3(); sink++; }
NOIPA void child1(void) { child2(); sink++; }

NOIPA void d29(void) { SPIN(6); }
NOIPA void d28(void) { d29(); sink++; }
NOIPA void d27(void) { d28(); sink++; }
NOIPA void d26(void) { d27(); sink++; }
NOIPA void d25(void) { d26(); sink++; }
NOIPA void d24(void) { d25(); sink++; }
NOIPA void d23(void) { d24(); sink++; }
NOIPA void d22(void) { d23(); sink++; }
NOIPA void d21(void) { d22(); sink++; }
NOIPA void d20(void) { d21(); sink++; }
NOIPA void d19(void) { d20(); sink++; }
NOIPA void d18(void) { d19(); sink++; }
NOIPA void d17(void) { d18(); sink++; }
NOIPA void d16(void) { d17(); sink++; }
NOIPA void d15(void) { d16(); sink++; }
NOIPA void d14(void) { d15(); sink++; }
NOIPA void d13(void) { d14(); sink++; }
NOIPA void d12(void) { d13(); sink++; }
NOIPA void d11(void) { d12(); sink++; }
NOIPA void d10(void) { d11(); sink++; }
NOIPA void d9(void) { d10(); sink++; }
NOIPA void d8(void) { d9(); sink++; }
NOIPA void d7(void) { d8(); sink++; }
NOIPA void d6(void) { d7(); sink++; }
NOIPA void d5(void) { d6(); sink++; }
NOIPA void d4(void) { d5(); sink++; }
NOIPA void d3(void) { d4(); sink++; }
NOIPA void d2(void) { d3(); sink++; }
NOIPA void d1(void) { d2(); sink++; }

/* busy3 runs until the thread has used 1 ms more CPU time. */
NOIPA void busy3(void) {
	struct timespec t0, t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	do {
		sink++;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 1000000L);
}
NOIPA void busy2(void) { busy3(); sink++; }
NOIPA void busy1(void) { busy2(); sink++; }

NOIPA void nap3(void) {
	struct timespec ts = {0, 9000000};
	nanosleep(&ts, NULL);
	sink++;
}
NOIPA void nap2(void) { nap3(); sink++; }
NOIPA void nap1(void) { nap2(); sink++; }

static unsigned long zero_reads;
static int zero_fd;
static char zero_buf[16384];

NOIPA void read3(void) {
	for (unsigned long i = 0; i < zero_reads; i++)
		if (read(zero_fd, zero_buf, sizeof zero_buf) != sizeof zero_buf) exit(1);
	sink++;
}
NOIPA void read2(void) { read3(); sink++; }
NOIPA void read1(void) { read2(); sink++; }

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int running;

/* started counts the threads that have reached their chain. */
static void started(const char *name) {
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&mu);
	running++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&mu);
}

NOIPA void *spin5(void *arg) { started("spin5"); a1(); return arg; }
NOIPA void *spin20(void *arg) { started("spin20"); b1(); return arg; }
NOIPA void *spin60(void *arg) { started("spin60"); c1(); return arg; }
NOIPA void *spin32(void *arg) { started("spin32"); d1(); return arg; }

/* recurse_depth calls of rec(), each frame bigger than the 8 bytes of its
 * return address: the stack grows past any copy a sampler makes. */
static int recurse_depth = 2000;
NOIPA void e1(void) { SPIN(4); }
NOIPA int rec(int n) {
	volatile int pad[4] = {n};
	if (n == 0)
		e1();
	else
		rec(n - 1);
	sink++;
	return pad[0];
}
NOIPA void *recurse_spin(void *arg) { started("recurse"); rec(recurse_depth - 1); return arg; }
NOIPA void *work(void *arg) { started((const char *)arg); d1(); return arg; }
NOIPA void *late_spin(void *arg) { started("late"); late1(); return arg; }

static double reader_cpu, reader_sys;

NOIPA void *reader(void *arg) {
	pthread_setname_np(pthread_self(), "reader");
	read1();
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	reader_sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	reader_cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + reader_sys;
	return arg;
}
static long long napped_ns, sleeper_start_ns;

static long long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

NOIPA void *sleeper(void *arg) {
	started("sleeper");
	__atomic_store_n(&sleeper_start_ns, now_ns(), __ATOMIC_RELAXED);
	for (;;) {
		busy1();
		long long t0 = now_ns();
		nap1();
		__atomic_fetch_add(&napped_ns, now_ns() - t0, __ATOMIC_RELAXED);
	}
	return arg;
}
NOIPA void child_spin(void) {
	prctl(PR_SET_NAME, "child");
	child1();
	sink++;
}

static void start(void *(*fn)(void *)) {
	pthread_t t;
	if (pthread_create(&t, NULL, fn, NULL) != 0) exit(1);
}

static void wait_running(int n) {
	pthread_mutex_lock(&mu);
	while (running < n) pthread_cond_wait(&cond, &mu);
	pthread_mutex_unlock(&mu);
}

static int spawn(void) {
	int before = running;
	start(late_spin);
	wait_running(before + 1);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		child_spin();
		_exit(0);
	}
	return pid;
}

static double seconds;

static void *timer(void *arg) {
	struct timespec ts = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
	nanosleep(&ts, NULL);
	long long start = __atomic_load_n(&sleeper_start_ns, __ATOMIC_RELAXED);
	if (start != 0) {
		printf("napped %.4f\n", (double)__atomic_load_n(&napped_ns, __ATOMIC_RELAXED) / (double)(now_ns() - start));
		fflush(stdout);
	}
	exit(0);
	return arg;
}

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: recprog spin|deep|recurse|sleep|late SECONDS [auto|DEPTH] | recprog work|zero ITERATIONS\n");
		return 2;
	}
	if (strcmp(argv[1], "work") == 0) {
		/* two threads, 32 frames deep, run d29()'s loop ITERATIONS
		 * times each: the time and CPU time it took */
		limit = strtoul(argv[2], NULL, 10) * 6;
		long long t0 = now_ns();
		pthread_t w0, w1;
		pthread_create(&w0, NULL, work, "work0");
		pthread_create(&w1, NULL, work, "work1");
		pthread_join(w0, NULL);
		pthread_join(w1, NULL);
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		double user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
		printf("elapsed %.6f cpu %.6f sys %.6f\n", (now_ns() - t0) / 1e9, user + sys, sys);
		return 0;
	}
	if (strcmp(argv[1], "zero") == 0) {
		zero_reads = strtoul(argv[2], NULL, 10);
		zero_fd = open("/dev/zero", O_RDONLY);
		pthread_t r;
		if (zero_fd < 0 || pthread_create(&r, NULL, reader, NULL) != 0) return 1;
		pthread_join(r, NULL);
		printf("cpu %.6f sys %.6f\n", reader_cpu, reader_sys);
		return 0;
	}
	seconds = atof(argv[2]);
	pthread_t t;
	pthread_create(&t, NULL, timer, NULL);
	if (strcmp(argv[1], "spin") == 0) {
		start(spin5);
		start(spin20);
		start(spin60);
		wait_running(3);
	} else if (strcmp(argv[1], "deep") == 0) {
		start(spin32);
		wait_running(1);
	} else if (strcmp(argv[1], "recurse") == 0) {
		if (argc > 3 && atoi(argv[3]) > 0)
			recurse_depth = atoi(argv[3]);
		start(recurse_spin);
		wait_running(1);
	} else if (strcmp(argv[1], "sleep") == 0) {
		start(sleeper);
		wait_running(1);
	} else if (strcmp(argv[1], "late") != 0) {
		fprintf(stderr, "recprog: unknown mode %s\n", argv[1]);
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	if (strcmp(argv[1], "late") == 0) {
		if (argc > 3 && strcmp(argv[3], "auto") == 0) {
			struct timespec ts = {0, 200000000};
			nanosleep(&ts, NULL);
			spawn();
		} else {
			char line[64];
			while (fgets(line, sizeof line, stdin)) {
				if (strncmp(line, "spawn", 5) == 0) {
					int pid = spawn();
					printf("spawned %d\n", pid);
					fflush(stdout);
				}
			}
		}
	}
	for (;;) pause();
}
