package hugeheap

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

const hugePage = 2 << 20

func reserve(n int) {
	if n < 2*hugePage {
		return
	}
	b := make([]byte, n)
	a := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (hugePage - 1))
	if err := unix.Madvise(b[a:a+(n-a)&^(hugePage-1)], unix.MADV_HUGEPAGE); err != nil {
		return
	}
	runtime.KeepAlive(b)
	b = nil
	runtime.GC()
}
