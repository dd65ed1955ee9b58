package symbolize

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// FuzzSymbolize loads arbitrary bytes as an ELF object (the way the vDSO
// image read from a target is loaded) and looks up functions, lines and
// inlined calls in it: no input may panic, and a Lazy symbolizer's
// LookupFuncs must name what LookupFunc names. Seeds: the corpus files up to 256 KB, and a
// small program with DWARF line tables built with gcc -g when gcc is
// there.
func FuzzSymbolize(f *testing.F) {
	for _, p := range corpus.List() {
		if st, err := os.Stat(p); err == nil && st.Size() <= 256<<10 {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data, uint64(0x1000))
			}
		}
	}
	if gcc, err := exec.LookPath("gcc"); err == nil {
		dir := f.TempDir()
		src, exe := filepath.Join(dir, "p.c"), filepath.Join(dir, "p")
		if os.WriteFile(src, []byte(progSource), 0o644) == nil &&
			exec.Command(gcc, "-g", "-O1", "-o", exe, src).Run() == nil {
			if data, err := os.ReadFile(exe); err == nil {
				f.Add(data, uint64(0x1139))
			}
		}
	}
	f.Add([]byte("\x7fELF"), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, addr uint64) {
		s := New()
		s.DebugDirs = nil // only the input: no separate debug files
		defer s.Close()
		if s.Register("[fuzz]", bytes.NewReader(data)) != nil {
			return
		}
		addrs := []uint64{addr, addr + 1, addr - 1}
		// Addresses inside the object's code, where symbols and lines are.
		if ef, err := elf.NewFile(bytes.NewReader(data)); err == nil {
			_, _ = SymbolNames(ef, elf.SHT_DYNSYM, []uint32{0, 1, 2, uint32(addr), 1 << 31})
			for i, sec := range ef.Sections {
				if i >= 8 {
					break
				}
				if sec.Flags&elf.SHF_EXECINSTR != 0 {
					addrs = append(addrs, sec.Addr, sec.Addr+addr%(sec.Size+1))
				}
			}
		}
		for _, a := range addrs {
			if sym, ok := s.Lookup("[fuzz]", a); ok {
				_ = Demangle(sym.Name)
				_ = sym.String()
			}
			if len(s.Inlines("[fuzz]", a)) > maxInlineDepth {
				t.Fatalf("more than %d inlined levels", maxInlineDepth)
			}
		}
		_ = s.Err("[fuzz]")
		// A Lazy symbolizer names the same functions, for any bytes.
		lazy := New()
		lazy.DebugDirs, lazy.Lazy = nil, true
		defer lazy.Close()
		if lazy.Register("[fuzz]", bytes.NewReader(data)) == nil {
			for i, got := range lazy.LookupFuncs("[fuzz]", addrs) {
				if want, _ := s.LookupFunc("[fuzz]", addrs[i]); got != want {
					t.Fatalf("%#x: lazy %+v, index %+v", addrs[i], got, want)
				}
			}
		}
		if len(data) > 0 && len(data) < 4096 {
			_ = Demangle("_Z" + string(data))
		}
	})
}
