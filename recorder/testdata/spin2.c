// spin2: two threads counting for 2 s; the program whose page faults and
// profiler CPU docs/PERFORMANCE.md gives for sframe record (Live
// profiling). Build: gcc -O2 -pthread -Wa,--gsframe -o spin2 spin2.c
#include <pthread.h>
#include <time.h>
volatile long x;
static void *spin(void *a) { time_t e = time(0) + 2; while (time(0) < e) x++; return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, spin, 0); spin(0); pthread_join(t, 0); }
