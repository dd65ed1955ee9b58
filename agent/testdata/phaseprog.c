/* phaseprog: spins in phase_a() for three seconds, then prints "b" and
 * spins in phase_b() until killed. */
#include <stdio.h>
#include <time.h>

#define NOIPA __attribute__((noipa))

static volatile unsigned long sink;

NOIPA void phase_a(void) {
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		for (int i = 0; i < 100000; i++)
			sink += i;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec - start.tv_sec < 3);
}

NOIPA void phase_b(void) {
	for (;;)
		sink++;
}

int main(void) {
	phase_a();
	printf("b\n");
	fflush(stdout);
	phase_b();
}
