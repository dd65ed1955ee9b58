package prefault

import (
	"syscall"
	"unsafe"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): fault the pages
// in, writable, as writes would.
const madvPopulateWrite = 23

// chunk is the runtime's heap growth unit (pallocChunkBytes): heap
// memory is mapped read-write in whole, aligned chunks of this size.
const chunk = 4 << 20

func init() { Heap(Size) }

// frontier is the first byte of a fresh allocation: where the heap's
// next pages are. It is kept in a package variable so that the
// allocation is on the heap.
var frontier *[8192]byte

// Heap populates up to n bytes of the Go heap from the page of a fresh
// allocation, clipped to the end of the runtime's 4 MiB chunk, and
// returns the range it asked the kernel to populate, and the error.
func Heap(n uintptr) (start, length uintptr, err error) {
	frontier = new([8192]byte)
	page := uintptr(syscall.Getpagesize())
	start = uintptr(unsafe.Pointer(frontier)) &^ (page - 1)
	end := (start + chunk) &^ (chunk - 1)
	length = min(n&^(page-1), end-start)
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, length, madvPopulateWrite); e != 0 {
		err = e
	}
	return start, length, err
}
