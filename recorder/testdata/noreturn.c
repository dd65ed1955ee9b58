/* noreturn: spins in die, called last by f, called last by g, called
 * last by main: each caller's return address is the first byte after its
 * function (TestBPFCallersAtFunctionEnd). Run: ./noreturn ITERATIONS */
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline, noreturn)) void die(long n)
{
	for (long i = 0;; i++) {
		sink++;
		if (i == n)
			exit(0);
	}
}

__attribute__((noinline)) void f(long n)
{
	sink++;
	die(n);
}

__attribute__((noinline)) void g(long n)
{
	sink += 2;
	f(n);
}

int main(int argc, char **argv)
{
	g(argc > 1 ? atol(argv[1]) : 1000000000L);
}
