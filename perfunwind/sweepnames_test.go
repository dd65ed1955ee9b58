package perfunwind

import (
	"debug/elf"
	"os"
	"runtime"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestSweepReleasesSymbols: once the last process mapping a file has
// exited, Sweep lets the file's symbol table go, though the Resolver
// keeps naming the files of running processes. Each file's symbol names
// are one string; a name kept by what outlives the file (the Resolver's
// demangled names, and Locs of other files allocated in the same block
// as the file's) kept all of it.
func TestSweepReleasesSymbols(t *testing.T) {
	exe := testprog.BuildGo(t, "cmd/gofmt")
	ef, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	syms, err := ef.Symbols()
	var text *elf.Prog
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			text = p
			break
		}
	}
	ef.Close()
	if err != nil || text == nil {
		t.Fatalf("%s: symbols %v, text segment %v", exe, err, text)
	}
	var addrs []uint64 // of functions, spread over the text
	for i, sym := range syms {
		if elf.ST_TYPE(sym.Info) == elf.STT_FUNC && sym.Value >= text.Vaddr && sym.Value < text.Vaddr+text.Memsz && i%5 == 0 {
			addrs = append(addrs, sym.Value)
		}
	}
	if len(addrs) < 100 {
		t.Fatalf("%d functions in %s", len(addrs), exe)
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	s, err := NewSession(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := NewResolver(s)
	defer r.Close()
	// Process 2 maps a copy of the program, another file, and runs on: its names are resolved in turn with process 1's.
	dir := t.TempDir()
	other := dir + "/copy"
	if b, err := os.ReadFile(exe); err != nil || os.WriteFile(other, b, 0o755) != nil {
		t.Fatal("copying the program")
	}
	const base = 0x10000000000 // where a PIE would go; the mapping's bias makes ELF addresses of it
	mapAt := func(pid uint32, path string) *Mapping {
		bias := uint64(0)
		if ef.Type == elf.ET_DYN {
			bias = base
		}
		s.Comm(pid, pid, "test", true)
		s.Mmap(pid, pid, text.Vaddr&^0xfff+bias, text.Memsz+0x1000, text.Off&^0xfff, path, true, nil)
		return s.procs[pid].find(addrs[0] + bias)
	}
	before := heap()
	m1, m2 := mapAt(1, exe), mapAt(2, other)
	if m1 == nil || m2 == nil {
		t.Fatal("the text mappings not found")
	}
	bias := m1.Start - (text.Vaddr &^ 0xfff)
	named := 0
	for _, a := range addrs {
		if r.Resolve(m1, a+bias).Sym != "" {
			named++
		}
		r.Resolve(m2, a+bias)
	}
	if named < len(addrs)/2 {
		t.Fatalf("%d of %d functions named", named, len(addrs))
	}
	loaded := heap()
	m1 = nil
	s.Exit(1, 1)
	if n := s.Sweep(r); n != 1 {
		t.Fatalf("Sweep forgot %d files, want 1", n)
	}
	after := heap()
	runtime.KeepAlive(m2)
	t.Logf("heap: %d KB before, %d KB with both files' symbols, %d KB after the sweep", before>>10, loaded>>10, after>>10)
	// The two files are the same program: each took half.
	if one, freed := (loaded-before)/2, loaded-min(loaded, after); freed < one*9/10 {
		t.Errorf("Sweep freed %d KB of the %d KB that the exited program's file took: the rest is still held", freed>>10, one>>10)
	}
}
