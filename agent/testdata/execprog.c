/* execprog: spins for a fifth of a second in pre_exec_spin(), then, given
 * a path, executes it as "execprog" (with no argument), which starts a
 * thread named "worker" spinning in post_exec_thread_spin(), spins as
 * long in post_exec_spin() and exits: one process, two programs, the
 * second with two threads. */
#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa))

static volatile unsigned long sink;

NOIPA void pre_exec_spin(void) {
	for (unsigned long i = 0; i < 200000000UL; i++)
		sink += i;
}

NOIPA void post_exec_spin(void) {
	for (unsigned long i = 0; i < 200000000UL; i++)
		sink += i;
}

NOIPA void *post_exec_thread_spin(void *arg) {
	for (unsigned long i = 0; i < 200000000UL; i++)
		sink += i;
	return arg;
}

int main(int argc, char **argv) {
	if (argc > 1) {
		pre_exec_spin();
		execl(argv[1], "execprog", (char *)0);
		return 1;
	}
	pthread_t t;
	if (pthread_create(&t, 0, post_exec_thread_spin, 0) == 0)
		pthread_setname_np(t, "worker");
	post_exec_spin();
	pthread_join(t, 0);
	return 0;
}
