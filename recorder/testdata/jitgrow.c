// jitgrow: a JIT of its own (x86-64) for the recorder's tests. It
// writes a perf map of 2000 entries for code elsewhere, then copies a
// counting loop into executable anonymous memory as functions jit0 to
// jit5, one more every 300 ms, each appended to /tmp/perf-PID.map as it
// is made, and runs all those made so far; then it rewrites the map,
// shorter, as one function "rewritten" over all of them, and runs them
// 600 ms more.
// Build: gcc -O2 -o jitgrow jitgrow.c
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static const unsigned char code[] = {
	0x55,             // push %rbp
	0x48, 0x89, 0xe5, // mov %rsp,%rbp
	0x48, 0x89, 0xf8, // mov %rdi,%rax
	0x48, 0xff, 0xc8, // 1: dec %rax
	0x75, 0xfb,       // jnz 1b
	0x5d,             // pop %rbp
	0xc3,             // ret
};
enum { N = 6, STRIDE = 0x100 };

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void run(unsigned char *mem, int n, double secs) {
	double end = now() + secs;
	while (now() < end)
		for (int i = 0; i < n; i++)
			((void (*)(long))(mem + i * STRIDE))(100000);
}

int main(void) {
	unsigned char *mem = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return 1;
	char path[64];
	snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(path, "w");
	if (!f)
		return 1;
	for (int i = 0; i < 2000; i++)
		fprintf(f, "%x 40 LazyCompile:*elsewhere_%d /srv/app/module.js:%d:1\n", 0x10000 + i * 0x40, i, i);
	fflush(f);
	for (int i = 0; i < N; i++) {
		memcpy(mem + i * STRIDE, code, sizeof code);
		fprintf(f, "%lx %x jit%d\n", (unsigned long)(mem + i * STRIDE), STRIDE, i);
		fflush(f);
		run(mem, i + 1, 0.3);
	}
	fclose(f);
	f = fopen(path, "w");
	fprintf(f, "%lx %x rewritten\n", (unsigned long)mem, N * STRIDE);
	fclose(f);
	run(mem, N, 0.6);
	printf("%d\n", (int)getpid());
	return 0;
}
