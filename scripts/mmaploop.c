/* mmaploop N: N mmap/munmap pairs of 256 KiB of anonymous memory, the
 * cost of record --bpf's mmap tracepoint (docs/PERFORMANCE.md). */
#include <sys/mman.h>
#include <stdlib.h>
int main(int argc, char **argv) {
	long n = atol(argv[1]);
	for (long i = 0; i < n; i++) {
		void *p = mmap(0, 256 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		munmap(p, 256 << 10);
	}
	return 0;
}
