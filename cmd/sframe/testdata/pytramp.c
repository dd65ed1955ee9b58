/* pytramp: CPython's perf trampolines (3.12+ with -X perf), without
 * Python: main -> py::outer (a trampoline) -> middle -> py::inner (a
 * trampoline) -> burn, which spins for 700 ms of CPU time. The
 * trampolines are Python/asm_trampoline.S's x86-64 bytes (sub $8,%rsp;
 * call *%rcx; add $8,%rsp; ret: no CFI, no frame pointer) in anonymous
 * executable memory, named in /tmp/perf-PID.map as Python names them,
 * with their size; py::inner crosses a page boundary. x86-64 only. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static const unsigned char code[] = {0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3};

/* Python calls a trampoline as its evaluator (tstate, frame, throw,
 * the real evaluator): the function to call is the fourth argument. */
typedef void (*trampoline)(void *, void *, int, void (*)(void));

static trampoline inner;

__attribute__((noinline)) void burn(void) {
	volatile uint64_t x = 0;
	clock_t start = clock();
	while (clock() - start < CLOCKS_PER_SEC * 7 / 10)
		for (int i = 0; i < 100000; i++)
			x += i;
}

__attribute__((noinline)) void middle(void) {
	inner(0, 0, 0, burn);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

int main(void) {
	unsigned char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	/* As 3.12 packs them, 11 bytes apart; the second across pages. */
	unsigned char *outer = p + 33, *in = p + 4096 - 3;
	memcpy(outer, code, sizeof code);
	memcpy(in, code, sizeof code);
	inner = (trampoline)in;

	char name[64];
	snprintf(name, sizeof name, "/tmp/perf-%d.map", getpid());
	FILE *f = fopen(name, "w");
	if (!f)
		return 1;
	fprintf(f, "%lx %zx py::outer:/tmp/pytramp.py\n", (unsigned long)(uintptr_t)outer, sizeof code);
	fprintf(f, "%lx %zx py::inner:/tmp/pytramp.py\n", (unsigned long)(uintptr_t)in, sizeof code);
	fclose(f);

	((trampoline)outer)(0, 0, 0, middle);
	return 0;
}
