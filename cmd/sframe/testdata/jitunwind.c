/* jitunwind: a JIT's trampoline with unwinding info in its jitdump file,
 * as Python 3.13's -X perf_jit writes them: main -> jit_trampoline (in an
 * mmap'd page: sub $8,%rsp; call *%rdi; add $8,%rsp; ret, no frame
 * pointer) -> burn, which spins for 700 ms of CPU time. The jitdump file
 * (jit-PID.dump in the directory argv[1], mapped executable so that a
 * recording's MMAP record names it) has a JIT_CODE_UNWINDING_INFO record
 * with the trampoline's .eh_frame and .eh_frame_hdr (Python's bytes),
 * then its JIT_CODE_LOAD record. x86-64 only. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static const unsigned char code[] = {0x48, 0x83, 0xec, 0x08, 0xff, 0xd7, 0x48, 0x83, 0xc4, 0x08, 0xc3};

/* The .eh_frame (CIE; FDE: CFA rsp+8, rsp+16 after the sub, rsp+8 after
 * the add), then .eh_frame_hdr, placed after the code as perf inject
 * places them: the .eh_frame at the code's end rounded up to 8 bytes. */
static const unsigned char unwind[] = {
	0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x7a, 0x52, 0x00, 0x01, 0x78, 0x10, 0x01,
	0x1b, 0x0c, 0x07, 0x08, 0x90, 0x01, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00,
	0xd0, 0xff, 0xff, 0xff, 0x0b, 0x00, 0x00, 0x00, 0x00, 0x44, 0x0e, 0x10, 0x46, 0x0e, 0x08, 0x00,
	0x01, 0x1b, 0x03, 0x3b, 0xcc, 0xff, 0xff, 0xff, 0x01, 0x00, 0x00, 0x00, 0xc0, 0xff, 0xff, 0xff,
	0xe8, 0xff, 0xff, 0xff};
enum { hdrSize = 20 };

static uint64_t now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void record(FILE *f, uint32_t id, const void *body, uint32_t size, const void *tail, uint32_t tailSize) {
	uint32_t total = 16 + size + tailSize;
	uint32_t pad = (8 - total % 8) % 8;
	uint64_t ts = now();
	total += pad;
	fwrite(&id, 4, 1, f);
	fwrite(&total, 4, 1, f);
	fwrite(&ts, 8, 1, f);
	fwrite(body, size, 1, f);
	fwrite(tail, tailSize, 1, f);
	fwrite("\0\0\0\0\0\0\0", pad, 1, f);
}

__attribute__((noinline)) void burn(void) {
	volatile uint64_t x = 0;
	clock_t start = clock();
	while (clock() - start < CLOCKS_PER_SEC * 7 / 10)
		for (int i = 0; i < 100000; i++)
			x += i;
}

int main(int argc, char **argv) {
	unsigned char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	memcpy(p, code, sizeof code);

	char name[4096];
	if (argc < 2)
		return 2;
	snprintf(name, sizeof name, "%s/jit-%d.dump", argv[1], getpid());
	FILE *f = fopen(name, "w+");
	if (!f)
		return 1;
	struct {
		uint32_t magic, version, total_size, elf_mach, pad1, pid;
		uint64_t timestamp, flags;
	} h = {0x4A695444, 1, 40, 62, 0, (uint32_t)getpid(), now(), 0};
	fwrite(&h, sizeof h, 1, f);
	uint64_t u[3] = {sizeof unwind, hdrSize, 0};
	record(f, 4, u, sizeof u, unwind, sizeof unwind);
	struct {
		uint32_t pid, tid;
		uint64_t vma, code_addr, code_size, code_index;
		char name[16];
	} load = {(uint32_t)getpid(), (uint32_t)getpid(), (uintptr_t)p, (uintptr_t)p, sizeof code, 1, "jit_trampoline"};
	record(f, 0, &load, sizeof load, code, sizeof code);
	fflush(f);
	if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fileno(f), 0) == MAP_FAILED)
		return 1;

	((void (*)(void (*)(void)))p)(burn);
	fclose(f); /* kept: a recording is reported after the run */
	return 0;
}
