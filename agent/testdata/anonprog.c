/* anonprog: two threads spin in code copied to anonymous memory, which
 * names no function: "anon" with an address alone to show (its frame
 * pointer cleared, so that a walk ends there), "nostack" with its stack
 * pointer cleared too, so that a sample copies no stack and has no user
 * frame at all. The main thread waits. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* xor %ebp,%ebp; jmp . */
static const unsigned char spin_nofp[] = {0x31, 0xed, 0xeb, 0xfe};
/* xor %ebp,%ebp; xor %esp,%esp; jmp . */
static const unsigned char spin_nostack[] = {0x31, 0xed, 0x31, 0xe4, 0xeb, 0xfe};

static void *run(void *code) {
	((void (*)(void))code)();
	return 0;
}

int main(void) {
	unsigned char *code = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		return 1;
	memcpy(code, spin_nofp, sizeof spin_nofp);
	memcpy(code + 64, spin_nostack, sizeof spin_nostack);
	pthread_t a, b;
	pthread_create(&a, 0, run, code);
	pthread_setname_np(a, "anon");
	pthread_create(&b, 0, run, code + 64);
	pthread_setname_np(b, "nostack");
	for (;;)
		pause();
}
