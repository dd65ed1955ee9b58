/* execprog: spins for a fifth of a second in pre_exec_spin(), then, given
 * a path, executes it as "execprog" (with no argument), which spins as
 * long in post_exec_spin() and exits: one process, two programs, single
 * threaded. */
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

int main(int argc, char **argv) {
	if (argc > 1) {
		pre_exec_spin();
		execl(argv[1], "execprog", (char *)0);
		return 1;
	}
	post_exec_spin();
	return 0;
}
