package cfi

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// corpusFrames lists corpus ELF files that have a readelf frames dump.
func corpusFrames(t testing.TB) []string {
	var out []string
	for _, p := range corpus.ELFs(t) {
		if _, err := os.Stat(p + ".frames.txt"); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no corpus files with .frames.txt")
	}
	return out
}

func rel(t testing.TB, p string) string {
	r, err := filepath.Rel(corpus.Dir(t), p)
	if err != nil {
		return p
	}
	return r
}

// TestCorpusReadelf checks Dump against `readelf --debug-dump=frames-interp`
// (binutils 2.47) for every corpus file: x86-64, AArch64 and s390x,
// executables, shared objects and relocatable objects.
func TestCorpusReadelf(t *testing.T) {
	files := corpusFrames(t)
	archs := map[elf.Machine]int{}
	for _, p := range files {
		want, err := os.ReadFile(p + ".frames.txt")
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		archs[f.Machine]++
		var got bytes.Buffer
		if err := Dump(&got, f, ""); err != nil {
			t.Errorf("%s: %v", rel(t, p), err)
		}
		f.Close()
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: output differs from readelf:\n%s", rel(t, p), corpus.FirstDiff(got.String(), string(want)))
		}
	}
	for _, m := range []elf.Machine{elf.EM_X86_64, elf.EM_AARCH64, elf.EM_S390} {
		if archs[m] == 0 {
			t.Errorf("corpus has no %v files", m)
		}
	}
	t.Logf("compared %d files", len(files))
}

// TestCorpusLookup checks the lookup path against the streamed rows: for
// every row of every FDE, RowForPC at its first and last address must
// return the same rules, through .eh_frame_hdr and through the index.
func TestCorpusLookup(t *testing.T) {
	files := corpusFrames(t)
	rows := 0
	for _, p := range files {
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range []string{".eh_frame", ".debug_frame"} {
			if f.Section(sec) == nil {
				continue
			}
			tab, err := FromELF(f, sec)
			if err != nil {
				t.Fatalf("%s: %v", rel(t, p), err)
			}
			if f.Section(".eh_frame_hdr") != nil && sec == ".eh_frame" && tab.Hdr() == nil {
				t.Errorf("%s: .eh_frame_hdr not used", rel(t, p))
			}
			noHdr := withoutHdr(t, tab)
			isRel := f.Type == elf.ET_REL
			it := tab.Entries()
			for it.Next() {
				e := it.Entry()
				if e.Err != nil {
					t.Errorf("%s: entry at %#x: %v", rel(t, p), e.Offset, e.Err)
					continue
				}
				if e.Kind != KindFDE {
					continue
				}
				fde := *e.FDE
				ut := tab.NewUnwindTable(&fde)
				for ut.Next() {
					row := *ut.Row()
					rows++
					if isRel {
						// Objects: FDE ranges of different text sections
						// overlap at 0, so only the per-FDE lookup applies.
						var r Row
						if err := tab.FDERow(&UnwindContext{}, &fde, row.End-1, &r); err != nil || !r.Equal(&row) {
							t.Errorf("%s: FDE %#x: FDERow(%#x) = %v, %v", rel(t, p), fde.Offset, row.End-1, err, r.CFA)
						}
						continue
					}
					for _, pc := range []uint64{row.Start, row.End - 1} {
						for _, tb := range []*Table{tab, noHdr} {
							got, err := lookup(tb, pc)
							if err != nil {
								t.Errorf("%s: RowForPC(%#x): %v", rel(t, p), pc, err)
								continue
							}
							if !got.Equal(&row) || got.Start != row.Start || got.End != row.End {
								t.Errorf("%s: RowForPC(%#x) = [%#x,%#x) %+v, want [%#x,%#x) %+v", rel(t, p), pc, got.Start, got.End, got.CFA, row.Start, row.End, row.CFA)
							}
						}
					}
				}
				if err := ut.Err(); err != nil {
					t.Errorf("%s: FDE %#x: %v", rel(t, p), fde.Offset, err)
				}
			}
			if it.Err() != nil {
				t.Errorf("%s: %v", rel(t, p), it.Err())
			}
		}
		f.Close()
	}
	if rows == 0 {
		t.Fatal("no rows checked")
	}
	t.Logf("checked %d rows", rows)
}

// withoutHdr makes a Table over tab's section that does not use
// .eh_frame_hdr, so that lookups go through the sorted index.
func withoutHdr(t testing.TB, tab *Table) *Table {
	n, err := New(tab.data, Options{Kind: tab.kind, Addr: tab.addr, ByteOrder: tab.order, AddrSize: tab.addrSize,
		Arch: tab.arch, TextBase: tab.text, DataBase: tab.dataBase, ReadPointer: tab.deref})
	if err != nil {
		t.Fatal(err)
	}
	n.name = tab.name
	return n
}

// TestCorpusNoFDE checks that addresses outside every FDE are reported as
// such rather than matched to a neighbour.
func TestCorpusNoFDE(t *testing.T) {
	p := filepath.Join(corpus.Dir(t), "x86_64", "v3", "basic-O2.elf")
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := FromELF(f, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range []uint64{0, 0x10, ^uint64(0)} {
		if _, err := lookup(tab, pc); !errors.Is(err, ErrNoFDE) {
			t.Errorf("RowForPC(%#x) error = %v, want ErrNoFDE", pc, err)
		}
	}
}

// readelfPath returns the installed readelf, or skips (fails under CI).
func readelfPath(t *testing.T) string {
	p, err := exec.LookPath("readelf")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("readelf not installed; required under CI")
		}
		t.Skip("readelf not installed")
	}
	return p
}

// systemFiles are the installed binaries compared against the installed
// readelf; missing ones are skipped.
var systemFiles = []string{
	"/usr/lib/x86_64-linux-gnu/libc.so.6",
	"/usr/lib/x86_64-linux-gnu/libm.so.6",
	"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
	"/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
	"/usr/bin/ls",
	"/usr/bin/bash",
	"/lib64/ld-linux-x86-64.so.2",
	"/usr/lib/aarch64-linux-gnu/libc.so.6",
	"/usr/lib64/libc.so.6",
}

// compareWithReadelf runs the installed readelf on path and compares.
// readelf before 2.42 does not print .eh_frame_hdr; then only the
// .eh_frame and .debug_frame sections are compared.
func compareWithReadelf(t *testing.T, readelf, path string) {
	// -wN: do not follow debug links to separate debug files, which
	// readelf would otherwise also dump ("loaded from ...").
	out, err := exec.Command(readelf, "-wN", "-wF", path).Output()
	if err != nil {
		t.Fatalf("%s: readelf: %v", path, err)
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got bytes.Buffer
	if bytes.Contains(out, []byte("Contents of the .eh_frame_hdr section")) {
		err = Dump(&got, f, "")
	} else {
		for _, s := range f.Sections {
			if s.Name == ".eh_frame" || s.Name == ".debug_frame" {
				if e := dumpSection(&got, f, s); e != nil {
					err = e
				}
			}
		}
	}
	if err != nil {
		t.Errorf("%s: %v", path, err)
	}
	if !bytes.Equal(got.Bytes(), out) {
		t.Errorf("%s: output differs from installed readelf:\n%s", path, corpus.FirstDiff(got.String(), string(out)))
	}
}

// TestSystemReadelf compares Dump with the installed readelf on system
// libraries and executables.
func TestSystemReadelf(t *testing.T) {
	readelf := readelfPath(t)
	n := 0
	for _, p := range systemFiles {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		n++
		compareWithReadelf(t, readelf, p)
	}
	if n == 0 {
		t.Skip("no system libraries found")
	}
}

// TestGCCDebugFrame compiles a program into .debug_frame variants (CIE
// versions 1, 3 and 4, 64-bit DWARF, compressed, relocatable objects,
// 32-bit objects with REL relocations) and compares with the installed
// readelf.
func TestGCCDebugFrame(t *testing.T) {
	readelf := readelfPath(t)
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not installed")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "a.c")
	os.WriteFile(src, []byte(`
int g(int x);
__attribute__((noinline)) int f(int n) { char buf[n*4+10]; __builtin_memset(buf, n, sizeof buf); return g(buf[3]) + buf[n]; }
__attribute__((noinline)) int h(int a, int b, int c, int d, int e, int f2, int g2, int h2) { return a+b*c+d*e+f2*g2+h2; }
int g(int x) { return x * 3 + h(x,1,2,3,4,5,6,7); }
int main(int argc, char **argv) { return f(argc) + g(argc); }
`), 0o644)
	variants := []struct {
		name string
		args []string
	}{
		{"v1.o", []string{"-O2", "-g", "-fno-asynchronous-unwind-tables", "-c"}},
		{"v3.o", []string{"-O2", "-g", "-fno-asynchronous-unwind-tables", "-Wa,--gdwarf-cie-version=3", "-c"}},
		{"v4.o", []string{"-O2", "-g", "-fno-asynchronous-unwind-tables", "-Wa,--gdwarf-cie-version=4", "-c"}},
		{"v4.elf", []string{"-O2", "-g", "-fno-asynchronous-unwind-tables", "-Wa,--gdwarf-cie-version=4"}},
		{"d64.o", []string{"-O0", "-g", "-gdwarf64", "-fno-asynchronous-unwind-tables", "-fno-dwarf2-cfi-asm", "-c"}},
		{"d64.elf", []string{"-O0", "-g", "-gdwarf64", "-fno-asynchronous-unwind-tables", "-fno-dwarf2-cfi-asm"}},
		{"z.elf", []string{"-O2", "-g", "-fno-asynchronous-unwind-tables", "-gz=zlib"}},
		{"both.elf", []string{"-O2", "-g"}},
		// 32-bit objects: SHT_REL relocations, addends in the section.
		{"m32.o", []string{"-m32", "-O2", "-g", "-c"}},
		{"m32-debug.o", []string{"-m32", "-O2", "-g", "-fno-asynchronous-unwind-tables", "-c"}},
	}
	for _, v := range variants {
		out := filepath.Join(dir, v.name)
		args := append(append([]string{}, v.args...), "-o", out, src)
		if msg, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			t.Logf("%s: gcc failed, skipped: %v\n%s", v.name, err, msg)
			continue
		}
		compareWithReadelf(t, readelf, out)
	}
}

// quirksAsm exercises readelf's display of odd CFI: restore_state with an
// empty stack, registers beyond the x86-64 table ("bad register", also
// with an expression), a user-range opcode, a remembered state that leaks
// from one FDE into the next, CFA expressions, and an all-nop program.
const quirksAsm = `
	.text
f:	.cfi_startproc
	.cfi_escape 0x0b
	nop
	.cfi_offset 200, -16
	nop
	.cfi_register 16, 150
	.cfi_escape 0x10, 0xc8, 0x01, 0x02, 0x76, 0x00
	nop
	.cfi_val_offset 3, -24
	.cfi_escape 0x16, 0x03, 0x01, 0x31
	.cfi_escape 0x2e, 0x10
	.cfi_register 3, 6
	.cfi_same_value 12
	.cfi_escape 0x13, 0x7e
	nop
	.cfi_escape 0x1e
	ret
	.cfi_endproc
g:	.cfi_startproc
	.cfi_remember_state
	.cfi_def_cfa_offset 48
	nop
	ret
	.cfi_endproc
h:	.cfi_startproc
	.cfi_escape 0x0b
	nop
	.cfi_escape 0x12, 0x06, 0x7c
	nop
	.cfi_escape 0x0f, 0x02, 0x77, 0x08
	nop
	.cfi_escape 0x0e, 0x20
	nop
	.cfi_def_cfa_register 7
	nop
	.cfi_escape 0x17
	ret
	.cfi_endproc
k:	.cfi_startproc
	nop
	.cfi_escape 0x00, 0x00
	.cfi_endproc
`

// TestReadelfQuirks assembles quirksAsm and compares with readelf.
func TestReadelfQuirks(t *testing.T) {
	readelf := readelfPath(t)
	as, err := exec.LookPath("as")
	if err != nil {
		t.Skip("as not installed")
	}
	dir := t.TempDir()
	src, obj := filepath.Join(dir, "q.s"), filepath.Join(dir, "q.o")
	os.WriteFile(src, []byte(quirksAsm), 0o644)
	if msg, err := exec.Command(as, "--64", src, "-o", obj).CombinedOutput(); err != nil {
		t.Skipf("as failed: %v\n%s", err, msg)
	}
	compareWithReadelf(t, readelf, obj)
}
