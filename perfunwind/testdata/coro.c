/* Test program for package perfunwind: a thread whose walks are on two
 * stacks, its own and a coroutine's (makecontext, on 256 KiB of the heap
 * that malloc maps apart from the thread's stack).
 *
 *   coro SECONDS   main spins for about a millisecond a few calls deep,
 *                  then switches to the coroutine, which spins at the
 *                  bottom of 160 calls of down() (each frame about 80
 *                  bytes, so about 13 KB of its stack) and switches back;
 *                  over and over until the process has had SECONDS of
 *                  CPU time (not wall time, so that a loaded machine
 *                  gives as many samples; and whole seconds' boundaries
 *                  do not cut the run short)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>

#define NOIPA __attribute__((noipa))

static volatile unsigned long sink;
static ucontext_t main_ctx, co_ctx;

NOIPA void spin(void) {
	for (volatile unsigned long i = 0; i < 300000; i++) {
	}
}

/* down keeps a frame of its own (the buffer) and calls itself depth
 * times, then spins. */
NOIPA void down(int depth) {
	volatile char pad[64];
	pad[0] = (char)depth;
	if (depth > 0) {
		down(depth - 1);
	} else {
		spin();
	}
	sink += pad[0];
}

NOIPA void coroutine(void) {
	for (;;) {
		down(160);
		swapcontext(&co_ctx, &main_ctx);
	}
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: coro SECONDS\n");
		return 2;
	}
	size_t size = 256 << 10;
	getcontext(&co_ctx);
	co_ctx.uc_stack.ss_sp = malloc(size);
	co_ctx.uc_stack.ss_size = size;
	co_ctx.uc_link = &main_ctx;
	makecontext(&co_ctx, coroutine, 0);
	long long want = atoll(argv[1]) * 1000000000LL;
	struct timespec t;
	do {
		down(2);
		swapcontext(&main_ctx, &co_ctx);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	} while (t.tv_sec * 1000000000LL + t.tv_nsec < want);
	return 0;
}
