/* callchains: three threads, "calls3", "calls10" and "calls30", each in a
 * chain of 3, 10 and 30 functions (calls3() -> e1() -> ... -> e3(), and
 * f1..f10, g1..g30 likewise) whose last function calls a short function
 * in a loop, so that many samples fall in its epilogue, between the pop
 * of the frame pointer and the return: built -O2 -fno-omit-frame-pointer,
 * the unwind rules there still say the caller's frame pointer is saved
 * below the stack pointer, which is already popped. Each leaf is a
 * function of its own (tick3, tick10, tick30) so that a stack names its
 * thread.
 *
 *   callchains CALLS   each thread calls its leaf CALLS times (about 3 ns
 *                      a call), then the program exits: the samples are
 *                      as many however loaded the machine is
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NOIPA __attribute__((noipa))

static volatile unsigned long sink;
static unsigned long calls;

/* TICK's counter on the stack gives the leaf a frame record: without
 * one, gcc leaves out the push and pop of the frame pointer. */
#define TICK                       \
	volatile unsigned long n_ = 1; \
	sink += n_;

NOIPA void tick3(void) { TICK }
NOIPA void tick10(void) { TICK }
NOIPA void tick30(void) { TICK }

NOIPA void e3(void) { for (unsigned long i = 0; i < calls; i++) tick3(); }
NOIPA void e2(void) { e3(); sink++; }
NOIPA void e1(void) { e2(); sink++; }

NOIPA void f10(void) { for (unsigned long i = 0; i < calls; i++) tick10(); }
NOIPA void f9(void) { f10(); sink++; }
NOIPA void f8(void) { f9(); sink++; }
NOIPA void f7(void) { f8(); sink++; }
NOIPA void f6(void) { f7(); sink++; }
NOIPA void f5(void) { f6(); sink++; }
NOIPA void f4(void) { f5(); sink++; }
NOIPA void f3(void) { f4(); sink++; }
NOIPA void f2(void) { f3(); sink++; }
NOIPA void f1(void) { f2(); sink++; }

NOIPA void g30(void) { for (unsigned long i = 0; i < calls; i++) tick30(); }
NOIPA void g29(void) { g30(); sink++; }
NOIPA void g28(void) { g29(); sink++; }
NOIPA void g27(void) { g28(); sink++; }
NOIPA void g26(void) { g27(); sink++; }
NOIPA void g25(void) { g26(); sink++; }
NOIPA void g24(void) { g25(); sink++; }
NOIPA void g23(void) { g24(); sink++; }
NOIPA void g22(void) { g23(); sink++; }
NOIPA void g21(void) { g22(); sink++; }
NOIPA void g20(void) { g21(); sink++; }
NOIPA void g19(void) { g20(); sink++; }
NOIPA void g18(void) { g19(); sink++; }
NOIPA void g17(void) { g18(); sink++; }
NOIPA void g16(void) { g17(); sink++; }
NOIPA void g15(void) { g16(); sink++; }
NOIPA void g14(void) { g15(); sink++; }
NOIPA void g13(void) { g14(); sink++; }
NOIPA void g12(void) { g13(); sink++; }
NOIPA void g11(void) { g12(); sink++; }
NOIPA void g10(void) { g11(); sink++; }
NOIPA void g9(void) { g10(); sink++; }
NOIPA void g8(void) { g9(); sink++; }
NOIPA void g7(void) { g8(); sink++; }
NOIPA void g6(void) { g7(); sink++; }
NOIPA void g5(void) { g6(); sink++; }
NOIPA void g4(void) { g5(); sink++; }
NOIPA void g3(void) { g4(); sink++; }
NOIPA void g2(void) { g3(); sink++; }
NOIPA void g1(void) { g2(); sink++; }

static void *calls3(void *arg) { pthread_setname_np(pthread_self(), "calls3"); e1(); return arg; }
static void *calls10(void *arg) { pthread_setname_np(pthread_self(), "calls10"); f1(); return arg; }
static void *calls30(void *arg) { pthread_setname_np(pthread_self(), "calls30"); g1(); return arg; }

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: callchains CALLS\n");
		return 2;
	}
	calls = strtoul(argv[1], NULL, 10);
	pthread_t t[3];
	pthread_create(&t[0], NULL, calls3, NULL);
	pthread_create(&t[1], NULL, calls10, NULL);
	pthread_create(&t[2], NULL, calls30, NULL);
	for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
	return 0;
}
