// Package prefault maps in, when the program starts, the Go heap pages
// that a short-lived command is about to use, with one system call
// instead of one page fault per page. cmd/sframe imports it for that
// side effect alone.
//
// Why: on virtual machines with shadow or nested paging a page fault is
// expensive. On the 2-vCPU "AMD EPYC" VM of docs/PERFORMANCE.md (Linux
// 6.18, a PVM guest) a fault on a fresh anonymous page costs 12-25 us,
// against about 1 us on common hardware, while MADV_POPULATE_WRITE maps
// a page for 1-1.5 us and its first touch then costs 2.5-3 us. With
// garbage collection off (as in cmd/sframe) every new heap page is a
// fault: `sframe stack PID` took 580-700 of them, `sframe -h` 330.
//
// How: the Go runtime grows its heap upward from the start of a
// randomly placed arena, in 4 MiB chunks mapped read-write whole, and
// its page allocator hands out the lowest free pages first. So the
// pages just above a fresh allocation are those the next allocations
// take: the package populates up to Size bytes there, never past the
// end of the 4 MiB chunk (which is mapped). Should a later runtime
// place its heap otherwise, the cost is at most Size bytes of resident
// memory and about half a millisecond; the system call's errors (EINVAL
// before Linux 5.14) are ignored.
//
// Linux only: on other systems Heap does nothing.
package prefault

// Size is how much of the heap the package's initialization populates:
// enough for `sframe stack` on a program of a dozen threads (with 1 MiB,
// an 11-thread target still took 566 faults a run, with 1.5 MiB 461),
// not so much that `sframe -h` maps pages it never uses (2 MiB: 261
// faults, 1.5 MiB: 247).
const Size = 3 << 19 // 1.5 MiB
