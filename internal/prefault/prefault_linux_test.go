package prefault

import (
	"runtime/debug"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident reports which pages of [start, start+n) are in memory.
func resident(t *testing.T, start, n uintptr) []bool {
	t.Helper()
	page := uintptr(syscall.Getpagesize())
	vec := make([]byte, (n+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, start, n, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore %#x+%d: %v", start, n, e)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

// TestHeapPopulatesWhereAllocationsGo checks what the package relies on:
// after Heap, the heap's next allocations lie in the populated range
// and are in memory before anything touches them. It fails if the
// runtime places new allocations elsewhere (the prefault would be
// wasted) or if nothing was populated.
func TestHeapPopulatesWhereAllocationsGo(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // as in cmd/sframe: nothing freed, nothing reused
	const big = 40 << 10                             // above 32 KB: straight from the page allocator, no per-P cache
	start, n, err := Heap(1 << 20)
	if n < 8*big {
		// The frontier is near the end of its 4 MiB chunk: fill the
		// rest, so that the heap grows into the next chunk, and retry.
		sink = append(sink, make([]byte, n+big))
		start, n, err = Heap(1 << 20)
	}
	if err == syscall.EINVAL {
		t.Skip("MADV_POPULATE_WRITE not supported (Linux before 5.14)")
	}
	if err != nil {
		t.Fatalf("Heap: %v", err)
	}
	if n < 8*big {
		t.Fatalf("Heap populated %d bytes from %#x, want at least %d", n, start, 8*big)
	}
	for i, in := range resident(t, start, n) {
		if !in {
			t.Fatalf("page %d of the %d bytes populated at %#x is not in memory", i, n, start)
		}
	}
	for i := 0; i < 6; i++ {
		b := make([]byte, big)
		sink = append(sink, b) // keep it: no reuse
		a := uintptr(unsafe.Pointer(&b[0]))
		if a < start || a+big > start+n {
			t.Fatalf("allocation %d at %#x+%d is outside the populated %#x-%#x", i, a, big, start, start+n)
		}
		for j, in := range resident(t, a, big) {
			if !in {
				t.Fatalf("allocation %d at %#x: page %d not in memory before its first touch", i, a, j)
			}
		}
	}
}

var sink [][]byte
