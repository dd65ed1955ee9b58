/* nsloop: a dynamically linked program that runs prog_loop until it is
   killed, for TestMountNamespace (run chrooted in a tmpfs of its own
   mount namespace). */
volatile unsigned long sink;

__attribute__((noinline)) void prog_loop(void) {
	for (;;)
		for (unsigned long i = 0; i < 1000000; i++)
			sink += i;
}

int main(void) {
	prog_loop();
	return 0;
}
