package dump

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/cfibuild"
	"github.com/sframekit/sframekit/internal/cfiseed"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/internal/cputime"
	"github.com/sframekit/sframekit/internal/elftest"
	"github.com/sframekit/sframekit/internal/memtest"
	"github.com/sframekit/sframekit/internal/testprog"
)

// TestCorpusReadelf checks WriteCFIText against `readelf
// --debug-dump=frames-interp` (binutils 2.47) for every corpus file:
// x86-64, AArch64 and s390x, executables, shared objects and relocatable
// objects.
func TestCorpusReadelf(t *testing.T) {
	files := corpus.Frames(t)
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
		if err := WriteCFIText(&got, &CFIInput{ELF: f}); err != nil {
			t.Errorf("%s: %v", corpus.Rel(t, p), err)
		}
		f.Close()
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: output differs from readelf:\n%s", corpus.Rel(t, p), corpus.FirstDiff(got.String(), string(want)))
		}
	}
	for _, m := range []elf.Machine{elf.EM_X86_64, elf.EM_AARCH64, elf.EM_S390} {
		if archs[m] == 0 {
			t.Errorf("corpus has no %v files", m)
		}
	}
	t.Logf("compared %d files", len(files))
}

// readelfPath returns the installed readelf, or skips (fails under CI).
func readelfPath(t *testing.T) string { return toolPath(t, "readelf") }

// toolPath returns the path of a tool the test needs; without it the
// test is skipped, and failed under CI (testprog.NeedTool).
func toolPath(t *testing.T, name string) string {
	t.Helper()
	testprog.NeedTool(t, name)
	p, _ := exec.LookPath(name)
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
		err = WriteCFIText(&got, &CFIInput{ELF: f})
	} else {
		for _, s := range f.Sections {
			if s.Name == ".eh_frame" || s.Name == ".debug_frame" {
				if e := writeCFISection(&got, f, s); e != nil {
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

// TestSystemReadelf compares WriteCFIText with the installed readelf on
// system libraries and executables.
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
	gcc := toolPath(t, "gcc")
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
	as := toolPath(t, "as")
	dir := t.TempDir()
	src, obj := filepath.Join(dir, "q.s"), filepath.Join(dir, "q.o")
	os.WriteFile(src, []byte(quirksAsm), 0o644)
	if msg, err := exec.Command(as, "--64", src, "-o", obj).CombinedOutput(); err != nil {
		t.Fatalf("as failed: %v\n%s", err, msg)
	}
	compareWithReadelf(t, readelf, obj)
}

// stdCIE is GCC's x86-64 CIE program: CFA rsp+8, return address at CFA-8.
var stdCIE = []byte{byte(cfi.OpDefCFA), 7, 8, byte(cfi.OpOffset) | 16, 1}

func advance(n byte) byte { return byte(cfi.OpAdvanceLoc) | n }

// ehFrameELF is an executable with .text at 0x1000 and sec as its
// .eh_frame at addr.
func ehFrameELF(sec []byte, addr uint64) []byte {
	return elftest.Build(elf.ET_EXEC, []elftest.Section{
		{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: 0x1000, Data: make([]byte, 0x100)},
		{Name: ".eh_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: addr, Data: sec},
	})
}

// TestSetLocPCRel checks DW_CFA_set_loc in a pcrel FDE encoding: the
// operand is relative to its own address in the section, as readelf and
// unwinders read it (it was taken relative to the start of the program's
// bytes), compared with readelf (cfi's TestSetLocPCRel checks the
// lookup).
func TestSetLocPCRel(t *testing.T) {
	const secAddr = 0x10000
	le := binary.LittleEndian
	var s cfibuild.Section
	cie := s.CIE(1, "zR", []byte{byte(cfi.PEPCRel | cfi.PESData4)}, 1, -8, 16, stdCIE)
	beginField := secAddr + uint64(len(s.B)) + 8 // after the FDE's length and CIE pointer
	body := le.AppendUint32(nil, uint32(0x1000-beginField))
	body = le.AppendUint32(body, 0x100)
	body = append(body, 0, advance(4)) // no augmentation data
	setLocField := beginField + uint64(len(body)) + 1
	body = append(body, byte(cfi.OpSetLoc))
	body = le.AppendUint32(body, uint32(0x1040-setLocField))
	body = append(body, byte(cfi.OpDefCFAOffset), 32, advance(4))
	s.FDE(cie, body)

	img := ehFrameELF(s.B, secAddr)
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := WriteCFIText(&got, &CFIInput{ELF: f, Section: ".eh_frame"}); err != nil {
		t.Fatal(err)
	}
	readelf := readelfPath(t)
	path := filepath.Join(t.TempDir(), "setloc.elf")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := exec.Command(readelf, "--debug-dump=frames-interp", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("WriteCFIText differs from readelf:\ngot:\n%s\nwant:\n%s", got.Bytes(), want)
	}
}

// TestDebugFrameBomb prints a file whose compressed .debug_frame
// declares, and really expands to, 1 GiB from 1 MiB (`sframe cfi
// --section .debug_frame` reached 6.65 GB of RSS on such a file). The
// section must be refused before it is decompressed (cfi's
// TestDebugFrameBomb checks FromELF).
func TestDebugFrameBomb(t *testing.T) {
	if memtest.InChild(t) {
		f, err := elf.NewFile(bytes.NewReader(elftest.Build(elf.ET_EXEC, []elftest.Section{
			{Name: ".debug_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED,
				Data: elftest.Chdr(elf.COMPRESS_ZLIB, 1<<30, elftest.ZlibZeros(1<<30))},
		})))
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteCFIText(io.Discard, &CFIInput{ELF: f, Section: ".debug_frame"}); !errors.Is(err, elffile.ErrTooLarge) {
			t.Errorf("WriteCFIText: %v, want elffile.ErrTooLarge", err)
		}
		return
	}
	memtest.AtMost(t, 200<<20, "reading a 1 MiB file")
}

// TestRememberStateBomb prints an FDE of 4 Mi DW_CFA_remember_state
// instructions (issue 10: 1.06 GB and 7.7 s for a 4 MB file, 3.7 GB for
// 16 MB): readelf's remembered states are bounded as the interpreter's
// (cfi's TestRememberStateBomb checks the other consumers).
func TestRememberStateBomb(t *testing.T) {
	if memtest.InChild(t) {
		const n = 4 << 20
		var s cfibuild.Section
		cie := s.CIE(1, "", nil, 1, -8, 16, []byte{byte(cfi.OpDefCFA), 7, 8})
		instr := bytes.Repeat([]byte{byte(cfi.OpRememberState)}, n)
		s.AbsFDE(cie, 0x1000, 0x100, false, append(instr, advance(1)))
		var w lineCounter
		if err := writeCFIData(&w, ".eh_frame", s.B, 0, binary.LittleEndian, 8, arch.AMD64); err != nil {
			t.Fatal(err)
		}
		if w == 0 {
			t.Error("nothing printed")
		}
		return
	}
	memtest.AtMost(t, 200<<20, "for a 4 MiB program")
}

// TestManyRowsText prints one FDE with 4 Mi rows as readelf text (issue
// 10): rows must be written as they are computed (TestManyRowsCFIJSON is
// the same for JSON).
func TestManyRowsText(t *testing.T) {
	const n = 4 << 20
	if memtest.InChild(t) {
		var lines lineCounter
		if err := WriteCFIText(&lines, &CFIInput{ELF: manyRows(n)}); err != nil {
			t.Fatal(err)
		}
		if lines < n {
			t.Errorf("%d lines for %d rows", lines, n)
		}
		return
	}
	memtest.AtMost(t, 200<<20, fmt.Sprintf("printing %d rows as text", n))
}

// BenchmarkCFIText formats the largest corpus file like readelf -wF (the
// work of `sframe cfi` after opening the file). On a shared machine wall
// time per op swings with the load; cpu-ns/op, the process's CPU time,
// much less.
func BenchmarkCFIText(b *testing.B) {
	f, err := elf.Open(filepath.Join(corpus.Dir(b), "x86_64", "v3", "big-pic.so"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	start := cputime.Now()
	for b.Loop() {
		if err := WriteCFIText(io.Discard, &CFIInput{ELF: f, Section: ".eh_frame"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cputime.Now()-start)/float64(b.N), "cpu-ns/op")
}

// cfiFuzzSeeds are sections for FuzzCFIText: synthetic ones with every
// opcode, in .eh_frame and .debug_frame, and the .eh_frame and
// .eh_frame_hdr sections of small corpus files of each architecture.
func cfiFuzzSeeds() []cfiseed.Seed {
	var seeds []cfiseed.Seed
	for _, debug := range []bool{false, true} {
		s := cfibuild.Section{Debug: debug}
		c := s.CIE(3, "", nil, 1, -8, 16, stdCIE)
		all := []byte{advance(1), byte(cfi.OpRememberState), byte(cfi.OpDefCFAExpression), 2, 0x76, 0x08,
			byte(cfi.OpExpression), 6, 1, 0x30, byte(cfi.OpValExpression), 3, 1, 0x31, byte(cfi.OpRegister), 16, 11,
			byte(cfi.OpGNUArgsSize), 8, byte(cfi.OpGNUWindowSave), byte(cfi.OpRestoreState), byte(cfi.OpAdvanceLoc1), 4,
			byte(cfi.OpValOffsetSF), 3, 0x7f, byte(cfi.OpDefCFASF), 7, 0x7e}
		s.AbsFDE(c, 0x1000, 0x100, false, all)
		flags := uint8(0)
		if debug {
			flags = 1
		}
		seeds = append(seeds, cfiseed.Seed{Data: s.B, Flags: flags})
	}
	return append(seeds, cfiseed.Corpus()...)
}

// cfiFuzzOne prints data as readelf would, as .eh_frame or .debug_frame
// (flags bit 0), 32- or 64-bit (bit 1), little- or big-endian (bit 2),
// for an architecture (bits 3-4), and as .eh_frame_hdr.
func cfiFuzzOne(t *testing.T, data []byte, flags uint8) {
	name := ".eh_frame"
	if flags&1 != 0 {
		name = ".debug_frame"
	}
	addrSize := 8
	if flags&2 != 0 {
		addrSize = 4
	}
	var order binary.ByteOrder = binary.LittleEndian
	if flags&4 != 0 {
		order = binary.BigEndian
	}
	a := arch.Arch((flags >> 3) & 3)
	if err := writeCFIData(io.Discard, name, data, 0x10000, order, addrSize, a); err != nil {
		t.Fatalf("%s: %v", name, err) // cfi.New only checks the options
	}
	writeCFIData(io.Discard, ".eh_frame_hdr", data, 0x8000, order, addrSize, a)
}

// FuzzCFIText feeds arbitrary bytes to the readelf text printer, as a
// CFI section and as .eh_frame_hdr: it must not panic nor fail but on a
// write error.
func FuzzCFIText(f *testing.F) {
	for _, seed := range cfiFuzzSeeds() {
		f.Add(seed.Data, seed.Flags)
	}
	f.Fuzz(cfiFuzzOne)
}

// TestCFITextFuzzSeeds runs the fuzz body over the seeds and over
// truncations and single-byte corruptions of them, so plain `go test`
// covers the malformed-input paths too.
func TestCFITextFuzzSeeds(t *testing.T) {
	corpus.Dir(t)
	for _, s := range cfiFuzzSeeds() {
		cfiseed.Variants(s, func(data []byte, flags uint8) { cfiFuzzOne(t, data, flags) })
	}
}
