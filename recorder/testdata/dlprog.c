/* Test program for sframe record --bpf: code that comes after the
 * profiler started.
 *
 *   dlprog dlopen LIB SECONDS
 *                  after 300 ms, loads LIB (dllib.c) and starts thread
 *                  "dl", spinning in dl_thread() -> lib_spin() -> lib1()
 *                  -> lib2() (the last three in LIB); exits after
 *                  SECONDS
 *   dlprog reload LIB1 LIB2 SECONDS
 *                  loads LIB1 and spins in it in thread "dl" until that
 *                  thread has had 300 ms of CPU, stops it and unloads
 *                  LIB1, then loads LIB2 (mapped where LIB1 was, when it
 *                  is no larger) and spins in it in thread "dl2";
 *                  prints both load addresses;
 *                  exits after SECONDS
 *   dlprog replace LIB NEW SECONDS
 *                  as reload, but loads LIB twice, renaming NEW to LIB
 *                  before the second load (another build replaced at
 *                  the path of the one still mapped, as a package
 *                  upgrade does)
 *   dlprog exec PROG ARGS...
 *                  spins 300 ms, then executes PROG with ARGS (the same
 *                  process, a new program)
 *   dlprog memfd PROG ARGS...
 *                  executes a copy of PROG in a memfd (fexecve), as
 *                  some runtimes and container tools run programs
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
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

/* wait_cpu sleeps until thread t has had ms milliseconds of CPU time:
 * on a loaded machine a wall-time wait gives it too few samples to judge. */
static void wait_cpu(pthread_t t, int ms) {
	clockid_t c;
	struct timespec ts, nap = {0, 10000000};
	if (pthread_getcpuclockid(t, &c) != 0)
		return;
	while (clock_gettime(c, &ts) == 0 && ts.tv_sec * 1000LL + ts.tv_nsec / 1000000 < ms)
		nanosleep(&nap, NULL);
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
	int replace = argc >= 5 && strcmp(argv[1], "replace") == 0;
	if (argc >= 5 && (strcmp(argv[1], "reload") == 0 || replace)) {
		for (int i = 0; i < 2; i++) {
			if (replace && i == 1 && rename(argv[3], argv[2]) != 0) {
				perror("dlprog: rename");
				return 1;
			}
			void *h = dlopen(argv[2 + (replace ? 0 : i)], RTLD_NOW);
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
				wait_cpu(t, 300);
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
	if (argc >= 3 && strcmp(argv[1], "memfd") == 0) {
		int in = open(argv[2], O_RDONLY), fd = memfd_create("dlprog-memfd", MFD_CLOEXEC);
		struct stat st;
		if (in < 0 || fd < 0 || fstat(in, &st) != 0 || sendfile(fd, in, NULL, st.st_size) != st.st_size) {
			perror("dlprog: memfd");
			return 1;
		}
		extern char **environ;
		fexecve(fd, argv + 2, environ);
		perror("dlprog: fexecve");
		return 1;
	}
	fprintf(stderr, "usage: dlprog dlopen LIB SECONDS | dlprog reload LIB1 LIB2 SECONDS | dlprog replace LIB NEW SECONDS | dlprog exec PROG ARGS... | dlprog memfd PROG ARGS...\n");
	return 2;
}
