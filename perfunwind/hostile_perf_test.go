//go:build linux

package perfunwind_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/memtest"
	"github.com/sframekit/sframekit/perfunwind"
)

// The address-space records of a hostile recording, given to a Session
// as Process gives them: each test bounds the memory a child process
// takes (memtest), and the bytes its work allocates, checked as it goes
// so that a regression fails early rather than after minutes.

// allocBudget fails t once the bytes allocated since it was made exceed
// max.
type allocBudget struct {
	t     *testing.T
	start uint64
	max   uint64
}

func newAllocBudget(t *testing.T, max uint64) *allocBudget {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &allocBudget{t: t, start: ms.TotalAlloc, max: max}
}

func (b *allocBudget) check(what string) uint64 {
	b.t.Helper()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n := ms.TotalAlloc - b.start
	if n > b.max {
		b.t.Fatalf("%s: %d MiB allocated, over %d MiB", what, n>>20, b.max>>20)
	}
	return n
}

func hostileSession(t *testing.T) *perfunwind.Session {
	s, err := perfunwind.NewSession(perfunwind.Options{Arch: arch.AMD64, Kallsyms: "/dev/null", SymFS: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestForkChainOfManyMappings: a process with 1,000 executable mappings,
// then a chain of 100,000 forks, one child in a hundred mapping a page of
// its own. Forks share their parent's address space until they change
// it; each fork copied the 1,000 mappings and their modules before (3 GB
// for 20,000 forks, and minutes).
func TestForkChainOfManyMappings(t *testing.T) {
	const forks = 100000
	own := func(pid uint32) uint64 { return 0x7f0000000000 + uint64(pid)<<12 }
	if memtest.InChild(t) {
		s := hostileSession(t)
		b := newAllocBudget(t, 256<<20)
		for i := range uint64(1000) {
			s.Mmap(1, 1, 0x10000000+i*0x10000, 0x1000, 0, fmt.Sprintf("/lib%d.so", i%8), true, nil)
		}
		for pid := uint32(2); pid < forks+2; pid++ {
			s.Fork(pid, pid-1, pid, pid-1)
			if pid%100 == 0 {
				s.Mmap(pid, pid, own(pid), 0x1000, 0, "//anon", true, nil)
			}
			if pid%5000 == 0 {
				b.check(fmt.Sprintf("%d forks", pid))
			}
		}
		last := uint32(forks + 1)
		if !s.Mapped(last, 0x10000000+999*0x10000) || !s.Mapped(last, own(100)) || !s.Mapped(last, own(forks)) ||
			s.Mapped(forks-1, own(forks)) || s.Mapped(1, own(100)) {
			t.Fatal("a child does not have its ancestors' mappings, or a parent has its child's")
		}
		t.Logf("%d MiB allocated", b.check("all the forks")>>20)
		return
	}
	memtest.AtMost(t, 300<<20, "for 100,000 forks of a process of 1,000 mappings")
}

// TestManyExecutableMappings: 40,000 executable mappings in one process,
// at random places. Each copied the unwinder's whole module list before
// (17 s).
func TestManyExecutableMappings(t *testing.T) {
	if memtest.InChild(t) {
		s := hostileSession(t)
		b := newAllocBudget(t, 1<<30)
		// A permutation of the slots, so that mappings land everywhere.
		const n = 40000
		for i := range uint64(n) {
			slot := (i * 7919) % n
			s.Mmap(1, 1, 0x10000000+slot*0x2000, 0x1000, 0, "/lib.so", true, nil)
			if i%2000 == 0 {
				b.check(fmt.Sprintf("%d mappings", i))
			}
		}
		for i := range uint64(n) {
			if !s.Mapped(1, 0x10000000+i*0x2000) {
				t.Fatalf("mapping %d missing", i)
			}
		}
		t.Logf("%d MiB allocated", b.check("40,000 mappings")>>20)
		return
	}
	memtest.AtMost(t, 300<<20, "for 40,000 executable mappings")
}

// TestDescendingMappings: 200,000 data mappings added from the highest
// address down, each before all the others. Each moved all the others in
// one array before (8-15 s, against 0.3 s ascending); and one mapping
// over all of them then cuts them all at once.
func TestDescendingMappings(t *testing.T) {
	if memtest.InChild(t) {
		s := hostileSession(t)
		b := newAllocBudget(t, 2<<30)
		const n = 200000
		for i := range uint64(n) {
			s.Mmap(1, 1, 0x10000000+(n-i)*0x2000, 0x1000, 0, "//anon", false, nil)
			if i%5000 == 0 {
				b.check(fmt.Sprintf("%d mappings", i))
			}
		}
		if !s.Mapped(1, 0x10000000+0x2000) || s.Mapped(1, 0x10000000+0x3000) {
			t.Fatal("mappings wrong")
		}
		s.Mmap(1, 1, 0x10000000, (n+1)*0x2000, 0, "/big", true, nil)
		if !s.Mapped(1, 0x10000000+0x3000) {
			t.Fatal("the mapping over them all is missing")
		}
		t.Logf("%d MiB allocated", b.check("200,000 mappings")>>20)
		return
	}
	memtest.AtMost(t, 300<<20, "for 200,000 mappings in descending order")
}
