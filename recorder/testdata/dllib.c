/* The library that dlprog loads after start: lib_spin() -> lib1() ->
 * lib2(), which spins. Build with -shared -fPIC (and -Wa,--gsframe). */
#define NOIPA __attribute__((noipa))

static volatile unsigned long sink;
static volatile int stop;

NOIPA void lib2(void) {
	volatile unsigned long n = 0;
	while (!stop) n += 5;
}
NOIPA void lib1(void) { lib2(); sink++; }
NOIPA void lib_spin(void) { lib1(); sink++; }
