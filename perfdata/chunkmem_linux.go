package perfdata

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// newChunkMem returns the memory of a chunk, chunkMem bytes on a 2 MiB
// boundary advised for transparent huge pages, and the function that
// releases it, once no record can refer to it. Reading into it costs
// one page fault instead of 512: on a virtual machine a page fault can
// cost tens of microseconds, more than copying the page (the faults of
// fresh 4 KiB pages were most of sframe report's system time). The
// memory is mapped, not allocated: the runtime would clear memory it
// reuses, touching twice the size (for the alignment) before the first
// read (4% of sframe report's time, with a chunk for each of the reads
// ahead). Should mapping fail, it comes from the heap.
func newChunkMem() ([]byte, func()) {
	const n = 2 * chunkMem
	p, err := unix.MmapPtr(-1, 0, nil, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, chunkMem), func() {}
	}
	// Keep the aligned chunkMem bytes: unmap the rest before and after.
	head := -uintptr(p) & (chunkMem - 1)
	lo := unsafe.Add(p, head)
	if head > 0 {
		unix.MunmapPtr(p, head)
	}
	if tail := n - head - chunkMem; tail > 0 {
		unix.MunmapPtr(unsafe.Add(lo, chunkMem), tail)
	}
	m := unsafe.Slice((*byte)(lo), chunkMem)
	_ = unix.Madvise(m, unix.MADV_HUGEPAGE) // only advice: the memory works without
	return m, func() { unix.MunmapPtr(lo, chunkMem) }
}
