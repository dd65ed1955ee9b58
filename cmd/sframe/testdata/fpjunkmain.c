/* Calls spin (fpjunk.S, a shared library) argv[1] times. */
#include <stdlib.h>

void spin(long n);

__attribute__((noinline)) static void work(long n) { spin(n); }

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 100;
	for (long i = 0; i < n; i++)
		work(1000000);
	return 0;
}
