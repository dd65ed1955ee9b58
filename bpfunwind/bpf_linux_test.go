//go:build linux && amd64

package bpfunwind

import (
	"debug/elf"
	"errors"
	"os"
	"testing"
	"unsafe"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/perfdata"
	"github.com/sframekit/sframekit/perfunwind"
	"github.com/sframekit/sframekit/unwind"
)

// loadOrSkip loads the walker, or skips the test where BPF is refused
// (never under CI, which runs as root).
func loadOrSkip(t *testing.T, opts Options) *Unwinder {
	t.Helper()
	u, err := Load(opts)
	if err != nil {
		if errors.Is(err, ErrPermission) && os.Getenv("CI") == "" {
			t.Skipf("BPF refused here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// TestVerifier loads the program: the kernel's verifier accepts it, at
// the deepest walk, and with the kernel's frames and a copy per event.
func TestVerifier(t *testing.T) {
	for _, o := range []Options{{}, {MaxDepth: 5, Kernel: true, Fallback: true, Events: 2}} {
		u := loadOrSkip(t, o)
		if fds := u.Programs(); len(fds) != max(o.Events, 1) || fds[0] <= 0 || fds[len(fds)-1] <= 0 {
			t.Fatalf("programs %v for %d events", fds, o.Events)
		}
	}
}

// TestLayout: the rows and buckets written into the memory-mapped maps
// are the program's, and so is the stack record's header Decode reads.
func TestLayout(t *testing.T) {
	if n := unsafe.Sizeof(walkRow{}); n != rowSize {
		t.Errorf("struct row is %d bytes, written as %d", n, rowSize)
	}
	if n := unsafe.Sizeof(walkBucket{}); n != bucketSize {
		t.Errorf("struct bucket is %d bytes, written as %d", n, bucketSize)
	}
	if n := unsafe.Offsetof(walkScratch{}.Out.Pcs); n != outHeader {
		t.Errorf("struct out's frames start at %d, read at %d", n, outHeader)
	}
	// The header's fields where Decode reads them (stop and event are
	// the two bytes at 14, one u16 in the generated struct).
	h := walkScratch{}.Out.H
	for _, f := range []struct {
		name      string
		off, want uintptr
	}{
		{"period", unsafe.Offsetof(h.Period), 0}, {"nuser", unsafe.Offsetof(h.Nuser), 8},
		{"nkern", unsafe.Offsetof(h.Nkern), 12}, {"stop", unsafe.Offsetof(h.Stop), 14},
		{"time", unsafe.Offsetof(h.Time), 16}, {"pid", unsafe.Offsetof(h.Pid), 24},
		{"tid", unsafe.Offsetof(h.Tid), 28}, {"cpu", unsafe.Offsetof(h.Cpu), 32},
	} {
		if f.off != f.want {
			t.Errorf("struct hdr's %s is at %d, read at %d", f.name, f.off, f.want)
		}
	}
}

// TestRowsAllocator: ranges of the rows map are taken first fit and
// given back merged with their free neighbours, so that evicted files'
// rows serve new ones.
func TestRowsAllocator(t *testing.T) {
	u := &Unwinder{free: []span{{0, 100}}}
	a, _ := u.allocRows(30)
	b, _ := u.allocRows(30)
	c, _ := u.allocRows(30)
	if _, ok := u.allocRows(20); ok || a != 0 || b != 30 || c != 60 {
		t.Fatalf("allocated %d %d %d, free %v", a, b, c, u.free)
	}
	u.freeRows(span{a, 30})
	u.freeRows(span{c, 30})
	if d, ok := u.allocRows(35); !ok || d != 60 {
		t.Errorf("35 rows at %d (%v), want 60; free %v", d, ok, u.free)
	}
	u.freeRows(span{60, 35})
	u.freeRows(span{b, 30})
	if len(u.free) != 1 || u.free[0] != (span{0, 100}) {
		t.Errorf("all freed: %v, want one range of 100", u.free)
	}
}

// TestEviction: a file's table stays loaded, idle, once no process maps
// it, and serves the next process that does; it is evicted when its rows
// are needed for another file's.
func TestEviction(t *testing.T) {
	const libc, ld = "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"
	for _, p := range []string{libc, ld} {
		if _, err := os.Stat(p); err != nil {
			t.Skip(err)
		}
	}
	sess, err := perfunwind.NewSession(perfunwind.Options{Arch: arch.Host(), SameKernel: true, SameMachine: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	libcMap := sess.MappingOf(&perfdata.Mmap{Pid: 1, Addr: 0x7f0000000000, Len: 0x200000, Filename: []byte(libc)})
	ldMap := sess.MappingOf(&perfdata.Mmap{Pid: 1, Addr: 0x7f1000000000, Len: 0x40000, Filename: []byte(ld)})
	libcRows := len(mustTable(t, libc).Rows)
	// Room for libc's rows, not for ld.so's beside them.
	u := loadOrSkip(t, Options{MaxRows: libcRows + len(mustTable(t, ld).Rows)/2})
	files := func() int { return len(u.files) }
	step := func(what string, f func(), want TableStats, kernelFiles int) {
		t.Helper()
		f()
		got := u.Tables
		got.Skipped, got.Rows = [NumReasons]int{}, 0
		if got != want || files() != kernelFiles {
			t.Errorf("%s: tables %+v, want %+v; %d files loaded, want %d", what, got, want, files(), kernelFiles)
		}
	}
	step("libc", func() { u.SyncProcess(1, []*perfunwind.Mapping{libcMap}) }, TableStats{Files: 1}, 1)
	step("exit", func() { u.DropProcess(1) }, TableStats{Files: 1, Idle: 1}, 1)
	step("libc again", func() { u.SyncProcess(2, []*perfunwind.Mapping{libcMap}) }, TableStats{Files: 1}, 1)
	step("exit again", func() { u.DropProcess(2) }, TableStats{Files: 1, Idle: 1}, 1)
	step("ld.so", func() { u.SyncProcess(3, []*perfunwind.Mapping{ldMap}) }, TableStats{Files: 2, Evicted: 1}, 1)
}

// mustTable returns the walker's table of the file at path.
func mustTable(t *testing.T, path string) *Table {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return BuildTable(unwind.LoadFileTables(f, path, unwind.LoadOptions{SFrameFromCFI: true}), arch.AMD64)
}
