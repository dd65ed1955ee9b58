package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/internal/elftest"
)

// TestSymbolNames checks that SymbolNames reads, for every index of each
// file's dynamic and static symbol tables (and indices past the end), the
// names debug/elf decodes from the whole table: the corpus's objects, the
// C library and, where g++ is installed, cc1plus (31,000 dynamic
// symbols).
func TestSymbolNames(t *testing.T) {
	paths := corpus.ELFs(t)
	if libs, _ := filepath.Glob("/lib/*/libc.so.6"); len(libs) > 0 {
		paths = append(paths, libs[0])
	}
	if out, err := exec.Command("g++", "-print-prog-name=cc1plus").Output(); err == nil {
		if p := strings.TrimSpace(string(out)); filepath.IsAbs(p) {
			paths = append(paths, p)
		}
	}
	tables := 0
	for _, p := range paths {
		f, err := elffile.Open(p)
		if err != nil {
			continue
		}
		for _, typ := range []elf.SectionType{elf.SHT_DYNSYM, elf.SHT_SYMTAB} {
			read := elffile.DynamicSymbols
			if typ == elf.SHT_SYMTAB {
				read = elffile.Symbols
			}
			all, err := read(f.File)
			if err != nil || len(all) == 0 {
				continue
			}
			// Every index, in reverse (reads need not go in order), and
			// three that are not in the table; then the first 600 in
			// order, as a PLT's (entries and names side by side, read
			// through the same chunks).
			every := []uint32{0, uint32(len(all)) + 1, 1 << 31}
			for i := len(all); i >= 1; i-- {
				every = append(every, uint32(i))
			}
			var first []uint32
			for i := 1; i <= min(len(all), 600); i++ {
				first = append(first, uint32(i))
			}
			for _, idx := range [][]uint32{every, first} {
				names, ok := SymbolNames(f.File, typ, idx)
				if !ok {
					t.Errorf("%s %v: no names", p, typ)
					continue
				}
				tables++
				for i, k := range idx {
					want := ""
					if k >= 1 && int(k) <= len(all) {
						want = all[k-1].Name
					}
					if names[i] != want {
						t.Errorf("%s %v: entry %d of %d asked: %q, debug/elf %q", p, typ, k, len(idx), names[i], want)
						break
					}
				}
			}
		}
		f.Close()
	}
	if tables == 0 {
		t.Skip("no symbol tables to read")
	}
	t.Logf("%d tables", tables)
}

// TestRadixSort sorts keys as sortedByStart packs them (starts of up to
// 43 bits above 20 bits of index), and others, against slices.Sort.
func TestRadixSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 255, 256, 257, 31000} {
		for _, kind := range []string{"packed", "wide", "equal", "sorted", "reversed"} {
			a := make([]int, n)
			for i := range a {
				switch kind {
				case "packed":
					a[i] = int((0x65a090+rng.Uint64N(0x1530b4c))<<20 | uint64(i))
				case "wide":
					a[i] = int(rng.Uint64() >> 1)
				case "equal":
					a[i] = 42
				case "sorted":
					a[i] = i << 30
				case "reversed":
					a[i] = (n - i) << 40
				}
			}
			want := slices.Clone(a)
			slices.Sort(want)
			radixSort(a)
			if !slices.Equal(a, want) {
				t.Fatalf("%d %s keys: not sorted as slices.Sort sorts them", n, kind)
			}
		}
	}
}

// TestEmptySymbolNames checks the names that readFuncSyms leaves unread
// until used: a function symbol whose name is empty names nothing, loses
// to a named one at its address (whichever comes first in the table and
// whatever the rule, perf's or ours), and one at offset 0 is not read at
// all; a name ends at its own NUL, not the table's.
func TestEmptySymbolNames(t *testing.T) {
	strtab := []byte("\x00foo\x00\x00bar\x00")
	const foo, empty, bar = 1, 5, 6
	ent := func(name uint32, value uint64) []byte {
		e := make([]byte, 24)
		binary.LittleEndian.PutUint32(e, name)
		e[4] = byte(elf.STB_GLOBAL)<<4 | byte(elf.STT_FUNC)
		binary.LittleEndian.PutUint16(e[6:], 1) // .text
		binary.LittleEndian.PutUint64(e[8:], value)
		binary.LittleEndian.PutUint64(e[16:], 0x10)
		return e
	}
	symtab := slices.Concat(make([]byte, 24),
		ent(empty, 0x1000), ent(foo, 0x1000), // a tie: the empty name first
		ent(empty, 0x1020), // alone
		ent(0, 0x1040),     // offset 0
		ent(bar, 0x1060))
	data := elftest.Build(elf.ET_DYN, []elftest.Section{
		{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: 0x1000, Data: make([]byte, 0x100), Align: 16},
		{Name: ".symtab", Type: elf.SHT_SYMTAB, Data: symtab, Link: 3, Info: 1, Align: 8, EntSize: 24},
		{Name: ".strtab", Type: elf.SHT_STRTAB, Data: strtab, Align: 1},
	})
	cases := []struct {
		addr uint64
		name string
	}{{0x1004, "foo"}, {0x1024, ""}, {0x1044, ""}, {0x1064, "bar"}}
	for _, perf := range []bool{false, true} {
		s := New()
		s.DebugDirs = nil
		s.PerfNames = perf
		if err := s.Register("[t]", bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			sym, ok := s.LookupFunc("[t]", c.addr)
			if ok != (c.name != "") || sym.Name != c.name {
				t.Errorf("PerfNames %v: %#x: %q, %v; want %q", perf, c.addr, sym.Name, ok, c.name)
			}
		}
		s.Close()
	}
	// A lazy lookup of them all at once answers the same.
	s := New()
	s.DebugDirs = nil
	s.Lazy = true
	defer s.Close()
	if err := s.Register("[t]", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	var addrs []uint64
	for _, c := range cases {
		addrs = append(addrs, c.addr)
	}
	for i, sym := range s.LookupFuncs("[t]", addrs) {
		if sym.Name != cases[i].name {
			t.Errorf("Lazy: %#x: %q, want %q", cases[i].addr, sym.Name, cases[i].name)
		}
	}
}
