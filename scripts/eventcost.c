// eventcost: what one kernel event costs on this machine, the figures
// docs/PERFORMANCE.md gives in "Start-up, threads and page faults".
//
//   gcc -O2 -o /tmp/eventcost scripts/eventcost.c && /tmp/eventcost
//
// Each figure is clock_gettime(CLOCK_MONOTONIC) around a loop, divided by
// the loop's count; run it a few times, and note the load average (page
// faults cost two to three times more on a loaded VM). It takes 7 s (it
// sleeps 6 of them: see the huge pages "freed 3 s before").
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void report(const char *what, double ns, long n) {
	printf("%-44s %9.2f µs\n", what, ns / n / 1000);
}

// touch maps len bytes (2 MiB-aligned), advises huge pages or not, and
// returns the nanoseconds its first touch of each page took; the memory is
// then freed.
static double touch(size_t len, int huge) {
	long step = huge ? 2 << 20 : sysconf(_SC_PAGESIZE);
	char *h = mmap(NULL, len + (2 << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h == MAP_FAILED) { perror("mmap"); exit(1); }
	char *a = (char *)(((unsigned long)h + (2 << 20) - 1) & ~((2UL << 20) - 1));
	madvise(a, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	double t = now();
	for (size_t i = 0; i < len; i += step) a[i] = 1;
	t = now() - t;
	munmap(h, len + (2 << 20));
	return t;
}

int main(void) {
	long page = sysconf(_SC_PAGESIZE);
	const long npages = 4096; // 16 MiB of 4 KiB pages
	size_t len = (size_t)npages * page;

	// A fresh anonymous page, first touched: one page fault each.
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) { perror("mmap"); return 1; }
	madvise(m, len, MADV_NOHUGEPAGE);
	double t = now();
	for (long i = 0; i < npages; i++) m[i * page] = 1;
	report("page fault on a fresh anonymous page", now() - t, npages);
	munmap(m, len);

	// MAP_POPULATE: the kernel maps every page in the mmap call.
	t = now();
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (m == MAP_FAILED) { perror("mmap"); return 1; }
	report("mmap(MAP_POPULATE), per page", now() - t, npages);
	munmap(m, len);

	// madvise(MADV_POPULATE_WRITE), then the first touch of each page.
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) { perror("mmap"); return 1; }
	madvise(m, len, MADV_NOHUGEPAGE);
	t = now();
	if (madvise(m, len, MADV_POPULATE_WRITE) != 0) perror("madvise(MADV_POPULATE_WRITE)");
	report("madvise(MADV_POPULATE_WRITE), per page", now() - t, npages);
	t = now();
	for (long i = 0; i < npages; i++) m[i * page] = 1;
	report("first touch after MADV_POPULATE_WRITE", now() - t, npages);
	munmap(m, len);

	// A 2 MiB transparent huge page: one fault maps 512 pages.
	const long nhuge = 8;
	size_t hlen = nhuge << 21;
	char *h = mmap(NULL, hlen + (2 << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h == MAP_FAILED) { perror("mmap"); return 1; }
	char *ha = (char *)(((unsigned long)h + (2 << 20) - 1) & ~((2UL << 20) - 1));
	madvise(ha, hlen, MADV_HUGEPAGE);
	t = now();
	for (long i = 0; i < nhuge; i++) ha[i << 21] = 1;
	report("2 MiB huge page fault (MADV_HUGEPAGE)", now() - t, nhuge);
	munmap(h, hlen + (2 << 20));

	// 64 MiB in huge pages right after 64 MiB was freed, then 3 s after,
	// and in 4 KiB pages 3 s after. Where the host takes free memory back
	// (a virtio balloon's free page reporting, about 2 s after a block of
	// 2 MiB or more is freed), the huge pages 3 s after are fresh host
	// memory. Per MiB.
	const size_t big = 64 << 20;
	touch(big, 1);
	report("64 MiB of huge pages, just freed, per MiB", touch(big, 1), 64);
	sleep(3);
	report("64 MiB of huge pages, freed 3 s before, per MiB", touch(big, 1), 64);
	sleep(3);
	report("64 MiB of 4 KiB pages, 3 s after, per MiB", touch(big, 0), 64);

	// System calls.
	const long ncalls = 20000;
	t = now();
	for (long i = 0; i < ncalls; i++) getppid();
	report("a system call (getppid)", now() - t, ncalls);
	t = now();
	for (long i = 0; i < ncalls; i++) sched_yield();
	report("sched_yield", now() - t, ncalls);
	const long nsleeps = 512;
	struct timespec us = {0, 1000};
	t = now();
	for (long i = 0; i < nsleeps; i++) nanosleep(&us, NULL);
	report("nanosleep of 1 µs (with its wake-up)", now() - t, nsleeps);
	return 0;
}
