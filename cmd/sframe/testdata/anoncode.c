/* anoncode: a thread blocked in a function called from code in anonymous
 * executable memory, as a JIT compiler's code calls into its runtime:
 * main -> (code in an mmap'd page: push %rbp; mov %rsp,%rbp; call *%rdi;
 * pop %rbp; ret) -> wait_here -> read(stdin). x86-64 only. Prints "ready"
 * once the code is in place; answers each line X with "pong X". */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

__attribute__((noinline)) void wait_here(void) {
	char line[256];
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		printf("pong %s", line);
		fflush(stdout);
	}
}

int main(void) {
	static const unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0xff, 0xd7, 0x5d, 0xc3};
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	memcpy(p, code, sizeof code);
	((void (*)(void (*)(void)))p)(wait_here);
	return 0;
}
