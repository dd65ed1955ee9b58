package perfdata

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// newChunkMem returns the memory of a chunk: chunkMem bytes on a 2 MiB
// boundary, advised for transparent huge pages, so that reading into it
// costs one page fault instead of 512. On a virtual machine a page fault
// can cost tens of microseconds, more than copying the page: the faults of
// fresh 4 KiB pages were most of sframe report's system time. The advice
// is only that: without huge pages the memory works the same.
func newChunkMem() []byte {
	b := make([]byte, 2*chunkMem)
	a := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (chunkMem - 1))
	m := b[a : a+chunkMem : a+chunkMem]
	_ = unix.Madvise(m, unix.MADV_HUGEPAGE)
	return m
}
