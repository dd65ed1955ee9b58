/* Test program for package perfunwind (x86-64, built with frame pointers
 * and no CFI): spin runs its loop with %rbp pointing at a made-up frame
 * on main's stack whose return address, 0x1234, lies in no mapping, as a
 * frame-pointer step through code that uses %rbp for data reads garbage
 * from the stack.
 *
 *   badfp MS   spins until the process has had MS milliseconds of CPU
 */
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) void spin(long n, unsigned long *fake) {
	__asm__ volatile("push %%rbp\n\t"
	                 "mov %1, %%rbp\n\t"
	                 "1: dec %0\n\t"
	                 "jnz 1b\n\t"
	                 "pop %%rbp\n\t"
	                 : "+r"(n)
	                 : "r"(fake)
	                 : "memory", "cc");
}

int main(int argc, char **argv) {
	long want = argc > 1 ? atol(argv[1]) : 100;
	volatile unsigned long fake[2] = {0, 0x1234};
	struct timespec t;
	do {
		spin(1000000, (unsigned long *)fake);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	} while (t.tv_sec * 1000L + t.tv_nsec / 1000000 < want);
	return 0;
}
