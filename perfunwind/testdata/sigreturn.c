/* sigreturn: raises SIGUSR1 at itself in a loop, for the given number of
 * milliseconds of CPU time; the handler returns at once, so that a good
 * share of the samples are taken while the kernel runs rt_sigreturn, the
 * user registers at the end of the signal trampoline's system call
 * (TestSigreturnSyscall).
 */
#include <signal.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static void handler(int sig)
{
	(void)sig;
	sink++;
}

int main(int argc, char **argv)
{
	double ms = argc > 1 ? atof(argv[1]) : 300;
	struct timespec ts;

	signal(SIGUSR1, handler);
	for (;;) {
		for (int i = 0; i < 100; i++)
			raise(SIGUSR1);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
		if (ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 >= ms)
			break;
	}
	return 0;
}
