// Package hugeheap backs the Go heap of a short-lived command with
// transparent huge pages, where the system gives them only on request
// (/sys/kernel/mm/transparent_hugepage/enabled set to madvise, the common
// default).
//
// A command that allocates a few tens of MB and exits pays a page fault
// for each 4 KiB page of heap it touches. On a virtual machine a fault
// can cost 15-40 us, more than the work done in the page: for sframe
// report, the faults of its heap were a fifth of its run. Reserve grows
// the heap by n bytes, advises huge pages for them, and frees them: the
// allocations that follow reuse that memory first (the runtime hands out
// the lowest free pages), and fault it in 2 MiB at a time.
//
// Linux only: on other systems Reserve does nothing.
package hugeheap

// Reserve grows the heap by n bytes backed by huge pages, as the package
// documentation says. It is advice: where the system or the runtime does
// not follow it, nothing changes but n bytes of address space; where the
// host reclaims free memory, it does nothing. Otherwise it runs a
// garbage collection, and is meant for the start of a command.
func Reserve(n int) { reserve(n) }
