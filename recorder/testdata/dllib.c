/* The library that dlprog loads after start: lib_spin() -> lib1() ->
 * lib2(), which spins. Build with -shared -fPIC (and -Wa,--gsframe). */
#define NOIPA __attribute__((noipa))

static volatile unsigned long sink;
static volatile int stop;

#ifdef PAD
/* Moves the functions below, so that a copy built with -DPAD has other
 * rows at the addresses of the one without. */
NOIPA void lib_pad(void) { __asm__ volatile(".skip 512, 0x90"); }
#endif

#ifdef NEW
/* Another build of the library, whose functions have other names. */
#define lib1 lib1_new
#define lib2 lib2_new
#endif

NOIPA void lib2(void) {
	volatile unsigned long n = 0;
	while (!stop) n += 5;
}
NOIPA void lib1(void) { lib2(); sink++; }
NOIPA void lib_spin(void) { lib1(); sink++; }
NOIPA void lib_stop(void) { stop = 1; }
