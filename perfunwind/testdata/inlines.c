/* inlines: the program TestInlinesAgainstPerfScript records, whose frames
 * perf script names from DWARF when it shows inlined calls (addr2line -f
 * -i): calls inlined into a function; a clone of a function, whose symbol
 * (work.constprop.0 or work.isra.0) is not its DWARF name (work), so that
 * perf shows the function as inlined; and a function under an assembler
 * name, whose DWARF linkage name (leaf_impl, not its name leaf) is its
 * symbol's; on x86-64, a function under two names (alias.S), for which
 * the assembler writes two DWARF entries. The argument is the
 * milliseconds of CPU time to run for.
 */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline __attribute__((always_inline)) unsigned long mix(unsigned long x)
{
	for (int i = 0; i < 200; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

static inline __attribute__((always_inline)) unsigned long step(unsigned long x)
{
	return mix(x) ^ (x >> 7);
}

unsigned long leaf(unsigned long x) __asm__("leaf_impl");

/* In alias.S on x86-64 (two names over one function); elsewhere here. */
unsigned long churn_second(unsigned long x);
#ifndef __x86_64__
unsigned long churn_second(unsigned long x)
{
	return mix(x);
}
#endif

__attribute__((noinline)) unsigned long leaf(unsigned long x)
{
	return mix(x + 1);
}

/* Its parameter unused is constant or unused: GCC drops it in a clone. */
__attribute__((noinline)) static unsigned long work(unsigned long x, int n, int unused)
{
	for (int i = 0; i < n; i++)
		x = step(x) + leaf(x) + churn_second(x);
	return x;
}

int main(int argc, char **argv)
{
	double until = cpu_ms() + (argc > 1 ? atof(argv[1]) : 1000);
	int n = argc > 2 ? atoi(argv[2]) : 3;
	unsigned long x = 1;
	while (cpu_ms() < until) {
		x = work(x, 50, 1);
		x += work(x, n, 2);
	}
	sink = x;
	return 0;
}
