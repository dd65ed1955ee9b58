package perfunwind

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/jitmap"
)

// TestJITNames: executable anonymous memory is named after the process's
// perf map, as perf names it, and its addresses from the map (read under
// SymFS); data mappings keep their names; a jitdump file's mapping is not
// taken for an object file; a perf map that is a FIFO is not opened for
// reading (the test would hang) and the summary says why it was not read.
func TestJITNames(t *testing.T) {
	symfs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(symfs, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(symfs, "tmp/perf-4242.map"), []byte("7f0000001000 40 JS:*fib /x/fib.js:1:13\n7f0000001040 20 Builtin:Add\n"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(symfs, "tmp/perf-4343.map"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(Options{Arch: arch.AMD64, SymFS: symfs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Mmap(4242, 4242, 0x7f0000000000, 0x10000, 0x7f0000000000, "//anon", true, nil)
	s.Mmap(4242, 4242, 0x7f0000100000, 0x1000, 0, "/nonexistent/jit-4242.dump", true, nil)
	s.Mmap(4242, 4242, 0x7f0000200000, 0x1000, 0x7f0000200000, "//anon", false, nil)
	s.Mmap(4343, 4343, 0x7f0000000000, 0x10000, 0x7f0000000000, "//anon", true, nil)
	s.Mmap(4444, 4444, 0x7f0000000000, 0x10000, 0x7f0000000000, "//anon", true, nil)
	s.Mmap(4545, 4545, 0x7f0000000000, 0x10000, 0x7f0000000000, "//anon", true, nil) // no frame there
	r := NewResolver(s)
	defer r.Close()
	p := s.procs[4242]
	for _, c := range []struct {
		addr          uint64
		mapping, name string
	}{
		{0x7f0000001000, "/tmp/perf-4242.map", "JS:*fib /x/fib.js:1:13"},
		{0x7f000000103f, "/tmp/perf-4242.map", "JS:*fib /x/fib.js:1:13"},
		{0x7f0000001050, "/tmp/perf-4242.map", "Builtin:Add"},
		{0x7f0000001060, "/tmp/perf-4242.map", ""},
		{0x7f0000200010, "//anon", ""},
	} {
		m := p.find(c.addr)
		if m == nil || m.Name != c.mapping {
			t.Errorf("%#x: mapping %+v, want %s", c.addr, m, c.mapping)
			continue
		}
		if l := r.Resolve(m, c.addr); l.Short != c.name || l.Name != c.name || l.Unversioned != c.name || c.name != "" && m.PerfAddr(c.addr) != c.addr {
			t.Errorf("%#x: %q (%#x), want %q", c.addr, l.Short, m.PerfAddr(c.addr), c.name)
		}
	}
	m := s.procs[4343].find(0x7f0000001000)
	if l := r.Resolve(m, 0x7f0000001000); m.Name != "/tmp/perf-4343.map" || l.Sym != "" {
		t.Errorf("FIFO: %s %q", m.Name, l.Sym)
	}
	if l := r.Resolve(s.procs[4444].find(0x7f0000001000), 0x7f0000001000); l.Sym != "" {
		t.Errorf("no perf map: %q", l.Sym)
	}
	for _, f := range s.Files() {
		if strings.Contains(f.Name, "jit-") {
			t.Errorf("the jitdump file taken for an object file: %+v", f)
		}
	}
	var b bytes.Buffer
	WriteSummary(&b, s)
	for _, want := range []string{"JIT code named from: 1\n  " + filepath.Join(symfs, "tmp/perf-4242.map") + " (2 functions)\n",
		"JIT symbol files not read: 1\n  " + filepath.Join(symfs, "tmp/perf-4343.map") + ": not a regular file\n",
		"JIT code without names, no perf map found (node --perf-basic-prof, python3 -X perf and Java agents write one): 1\n  /tmp/perf-4444.map\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary without %q:\n%s", want, b.String())
		}
	}
}

// TestJITBudget: once the Session has read its budget of JIT files, more
// are not read, and the summary says so.
func TestJITBudget(t *testing.T) {
	symfs := t.TempDir()
	os.MkdirAll(filepath.Join(symfs, "tmp"), 0o755)
	for _, pid := range []string{"1", "2"} {
		os.WriteFile(filepath.Join(symfs, "tmp/perf-"+pid+".map"), []byte("1000 40 f"+pid+"\n"), 0o644)
	}
	s, err := NewSession(Options{Arch: arch.AMD64, SymFS: symfs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.jitBudget.Store(5) // the first file only
	s.Mmap(1, 1, 0x1000, 0x1000, 0x1000, "//anon", true, nil)
	s.Mmap(2, 2, 0x1000, 0x1000, 0x1000, "//anon", true, nil)
	r := NewResolver(s)
	defer r.Close()
	if l := r.Resolve(s.procs[1].find(0x1000), 0x1000); l.Sym != "f1" {
		t.Errorf("first: %q", l.Sym)
	}
	if l := r.Resolve(s.procs[2].find(0x1000), 0x1000); l.Sym != "" {
		t.Errorf("past the budget: %q", l.Sym)
	}
	var b bytes.Buffer
	WriteSummary(&b, s)
	if !strings.Contains(b.String(), "perf-2.map: not read: ") {
		t.Errorf("summary:\n%s", b.String())
	}
}

// TestForgetJIT: a perf map is read once, so code the JIT made after it
// was read has no name; after ForgetJIT (between a continuous profiler's
// periods) what was appended is read, and only that, and names the new
// code, the budget counts the map once, and the JIT symbols of a process
// that exited are forgotten.
func TestForgetJIT(t *testing.T) {
	symfs := t.TempDir()
	os.MkdirAll(filepath.Join(symfs, "tmp"), 0o755)
	path := filepath.Join(symfs, "tmp/perf-7.map")
	os.WriteFile(path, []byte("1000 40 early\n"), 0o644)
	s, err := NewSession(Options{Arch: arch.AMD64, SymFS: symfs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Mmap(7, 7, 0x1000, 0x1000, 0x1000, "//anon", true, nil)
	s.Mmap(8, 8, 0x1000, 0x1000, 0x1000, "//anon", true, nil)
	r := NewResolver(s)
	defer r.Close()
	m := s.procs[7].find(0x1000)
	if l := r.Resolve(m, 0x1000); l.Sym != "early" {
		t.Fatalf("early: %q", l.Sym)
	}
	r.Resolve(s.procs[8].find(0x1000), 0x1000)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("1100 40 late\n")
	f.Close()
	if l := r.Resolve(m, 0x1100); l.Sym != "" {
		t.Errorf("before ForgetJIT: %q (the map is read once)", l.Sym)
	}
	if got := s.jitBudget.Load(); got != maxJITBytes-int64(len("1000 40 early\n")+1*jitmap.EntryBytes) {
		t.Errorf("budget %d after one file", got)
	}
	s.Exit(8, 8)
	s.ForgetJIT()
	read := s.JITBytesRead()
	if l := r.Resolve(m, 0x1100); l.Sym != "late" {
		t.Errorf("after ForgetJIT: %q", l.Sym)
	}
	if n := s.JITBytesRead() - read; n != int64(len("1100 40 late\n")) {
		t.Errorf("%d bytes read after ForgetJIT, want those appended", n)
	}
	if l := r.Resolve(m, 0x1000); l.Sym != "early" {
		t.Errorf("the function read before, after ForgetJIT: %q", l.Sym)
	}
	if _, ok := s.jits[8]; ok || s.jits[7] == nil {
		t.Error("the exited process's JIT symbols kept, or the running one's dropped")
	}
	if got := s.jitBudget.Load(); got != maxJITBytes-int64(len("1000 40 early\n1100 40 late\n")+2*jitmap.EntryBytes) {
		t.Errorf("budget %d after reading the map again", got)
	}
}

// TestJITNamesKeepNoMap: the Loc of a JIT address keeps its name only,
// not the perf map it was read from. A continuous profiler names JIT
// code again every tick (ForgetJIT) and keeps each tick's Locs until its
// period ends: when a Loc's name shared the map's text, and the map was
// read whole each tick, each tick kept a whole copy of the map (ten
// ticks of an 8 MB map: over 100 MB held). What is held is the one map
// the Session keeps, as its budget counts it.
func TestJITNamesKeepNoMap(t *testing.T) {
	symfs := t.TempDir()
	os.MkdirAll(filepath.Join(symfs, "tmp"), 0o755)
	var b strings.Builder
	const funcs = 100_000
	for i := range funcs {
		fmt.Fprintf(&b, "%x 40 LazyCompile:*function_%d /srv/app/some/long/path/module.js:%d:1\n", 0x100000+i*0x40, i, i)
	}
	if err := os.WriteFile(filepath.Join(symfs, "tmp/perf-9.map"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	mapBytes := uint64(b.Len())
	s, err := NewSession(Options{Arch: arch.AMD64, SymFS: symfs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Mmap(9, 9, 0x100000, funcs*0x40, 0x100000, "//anon", true, nil)
	r := NewResolver(s)
	defer r.Close()
	m := s.procs[9].find(0x100000)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	const ticks = 10
	var kept []*Loc // as a period's builder keeps them
	for i := range ticks {
		l := r.Resolve(m, uint64(0x100000+i*0x40))
		if want := fmt.Sprintf("LazyCompile:*function_%d /srv/app/some/long/path/module.js:%d:1", i, i); l.Sym != want {
			t.Fatalf("tick %d: %q, want %q", i, l.Sym, want)
		}
		kept = append(kept, l)
		s.ForgetJIT()
	}
	after := heap()
	runtime.KeepAlive(kept)
	if held := after - min(after, before); held > mapBytes+funcs*jitmap.EntryBytes {
		t.Errorf("%d Locs of %d ticks hold %d MB (the map is %d MB)", len(kept), ticks, held>>20, mapBytes>>20)
	}
}
