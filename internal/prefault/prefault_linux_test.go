package prefault

import (
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
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
//
// It runs in a child process started with garbage collection off, as
// cmd/sframe runs (SetGCPercent(-1) in main; its initialization stays
// below the first collection's goal): memory freed earlier would leave
// holes, where allocations go first. The child has one P (GOMAXPROCS=1):
// each P takes pages for small spans 64 at a time, and the testing
// package's goroutines on another P would take pages of the range. The
// heap starts at a random place in its 4 MiB chunk: when less than 1 MiB
// is left there, the child says so and another is started.
func TestHeapPopulatesWhereAllocationsGo(t *testing.T) {
	if os.Getenv("PREFAULT_TEST_CHILD") != "" {
		heapChild(t)
		return
	}
	for try := 0; ; try++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHeapPopulatesWhereAllocationsGo$", "-test.v")
		cmd.Env = append(os.Environ(), "PREFAULT_TEST_CHILD=1", "GOGC=off", "GOMAXPROCS=1")
		out, err := cmd.CombinedOutput()
		switch {
		case err != nil || !strings.Contains(string(out), "--- PASS"):
			t.Fatalf("child: %v\n%s", err, out)
		case strings.Contains(string(out), "near the chunk's end") && try < 10:
			continue
		}
		t.Logf("child:\n%s", out)
		return
	}
}

func heapChild(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const big = 40 << 10 // above 32 KB: no tiny or small-object span
	start, n, err := Heap(1 << 20)
	if err == syscall.EINVAL {
		t.Skip("MADV_POPULATE_WRITE not supported (Linux before 5.14)")
	}
	if err != nil {
		t.Fatalf("Heap: %v", err)
	}
	if n < 1<<20 {
		t.Logf("frontier %#x near the chunk's end: %d bytes populated", start, n)
		return
	}
	for i, in := range resident(t, start, n) {
		if !in {
			t.Fatalf("page %d of the %d bytes populated at %#x is not in memory", i, n, start)
		}
	}
	// Half the populated range in allocations: nearly all must be in it
	// and in memory before their first touch (the runtime's per-P page
	// cache may place one or two elsewhere).
	const allocs = 12
	var in []string
	for i := 0; i < allocs; i++ {
		b := make([]byte, big)
		sink = append(sink, b) // kept: no reuse
		a := uintptr(unsafe.Pointer(&b[0]))
		ok := a >= start && a+big <= start+n
		for _, r := range resident(t, a, big) {
			ok = ok && r
		}
		if ok {
			in = append(in, fmt.Sprintf("%#x", a))
		} else {
			t.Logf("allocation %d at %#x+%d: outside the populated %#x-%#x, or not in memory", i, a, big, start, start+n)
		}
	}
	if len(in) < allocs-2 {
		t.Fatalf("%d of %d allocations of %d bytes in the populated %#x-%#x and in memory, want %d or more", len(in), allocs, big, start, start+n, allocs-2)
	}
}

var sink [][]byte
