/* Test program for package recorder, built for i386 with -fno-omit-frame-pointer:
 * an i386 process whose frame-pointer frames hold, where a 64-bit walk
 * would take its caller's return address (8 bytes above the saved frame
 * pointer), an address in its own code and a zero: leaf's two arguments.
 *
 *   fpargs32 N   calls leaf N times, each spinning 100,000 times
 */
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noipa)) void leaf(void (*f)(void), int zero) {
	for (int i = 0; i < 100000; i++) {
		sink += (unsigned long)f + zero;
	}
}

__attribute__((noipa)) void top(int n) {
	for (int i = 0; i < n; i++) {
		leaf((void (*)(void))top, 0);
	}
}

int main(int argc, char **argv) {
	top(argc > 1 ? atoi(argv[1]) : 1);
	return 0;
}
