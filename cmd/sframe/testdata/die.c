/* Dies of the signal named by its argument: a real fault for SIGSEGV
   (at address 0x1234), SIGFPE (an integer division by zero) and SIGILL
   (an undefined instruction); abort() for SIGABRT; kill() for the
   others. The tests compare what sframe stack --core says of its cores
   with gdb. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

volatile int zero;

int main(int argc, char **argv) {
	int sig = argc > 1 ? atoi(argv[1]) : SIGSEGV;
	switch (sig) {
	case SIGSEGV:
		*(volatile int *)0x1234 = 1;
		break;
	case SIGFPE:
		return argc / zero;
	case SIGILL:
		__builtin_trap();
	case SIGABRT:
		abort();
	}
	kill(getpid(), sig);
	pause();
	return 0;
}
