package symbolize

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
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
			// three that are not in the table.
			idx := []uint32{0, uint32(len(all)) + 1, 1 << 31}
			for i := len(all); i >= 1; i-- {
				idx = append(idx, uint32(i))
			}
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
					t.Errorf("%s %v: entry %d: %q, debug/elf %q", p, typ, k, names[i], want)
					break
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
