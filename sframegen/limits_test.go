package sframegen

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/sframe"
)

// Addresses of the crafted file's sections.
const (
	craftSFrame = 0x4000
	craftEH     = 0x8000
	craftText   = 0x10000
)

// craftEHFrame returns an x86-64 .eh_frame, loaded at addr, with one CIE
// (CFA rsp+8, RA at CFA-8) and one FDE for the function at text whose
// program has n advances of one byte, each setting the CFA to rsp+16 or
// rsp+24 in turn: 3 bytes of CFI per row, n+1 rows.
func craftEHFrame(addr, text uint64, n int) []byte {
	le := binary.LittleEndian
	// length, CIE id, version 1, "zR", code align 1, data align -8, RA
	// column 16, augmentation: pcrel sdata4; def_cfa rsp+8, offset r16
	// at cfa-8, padding.
	out := []byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b, 0x0c, 7, 8, 0x90, 1, 0, 0}
	le.PutUint32(out, uint32(len(out)-4))
	fde := len(out)
	// length, CIE pointer, PC begin, PC range, no augmentation data.
	out = append(out, make([]byte, 17)...)
	for i := range n {
		out = append(out, 0x41, 0x0e, byte(16+8*(i%2))) // advance_loc 1; def_cfa_offset
	}
	for (len(out)-fde)%8 != 0 {
		out = append(out, 0)
	}
	le.PutUint32(out[fde:], uint32(len(out)-fde-4))
	le.PutUint32(out[fde+4:], uint32(fde+4))
	le.PutUint32(out[fde+8:], uint32(text-(addr+uint64(fde)+8)))
	le.PutUint32(out[fde+12:], uint32(n+1))
	return append(out, 0, 0, 0, 0) // terminator
}

// craftELF writes a minimal x86-64 shared object holding .text (NOBITS,
// size textSize) and, when not nil, the given .eh_frame and .sframe.
func craftELF(t *testing.T, textSize uint64, eh, sf []byte) string {
	t.Helper()
	le := binary.LittleEndian
	shstr := []byte("\x00.text\x00.eh_frame\x00.sframe\x00.shstrtab\x00")
	type sec struct {
		name uint32
		typ  elf.SectionType
		addr uint64
		data []byte
		size uint64
	}
	secs := []sec{
		{26, elf.SHT_STRTAB, 0, shstr, 0},
		{1, elf.SHT_NOBITS, craftText, nil, textSize},
	}
	if eh != nil {
		secs = append(secs, sec{7, elf.SHT_PROGBITS, craftEH, eh, 0})
	}
	if sf != nil {
		secs = append(secs, sec{17, elffile.SHT_GNU_SFRAME, craftSFrame, sf, 0})
	}
	var body bytes.Buffer
	body.Write(make([]byte, 64))
	shdrs := []elf.Section64{{}}
	for _, s := range secs {
		for body.Len()%8 != 0 {
			body.WriteByte(0)
		}
		h := elf.Section64{Name: s.name, Type: uint32(s.typ), Addr: s.addr, Off: uint64(body.Len()), Size: s.size, Addralign: 8}
		if s.typ != elf.SHT_STRTAB {
			h.Flags = uint64(elf.SHF_ALLOC)
		}
		if s.typ == elf.SHT_NOBITS {
			h.Flags |= uint64(elf.SHF_EXECINSTR)
		} else {
			h.Size = uint64(len(s.data))
			body.Write(s.data)
		}
		shdrs = append(shdrs, h)
	}
	for body.Len()%8 != 0 {
		body.WriteByte(0)
	}
	hdr := elf.Header64{Type: uint16(elf.ET_DYN), Machine: uint16(elf.EM_X86_64), Version: 1,
		Shoff: uint64(body.Len()), Ehsize: 64, Shentsize: 64, Shnum: uint16(len(shdrs)), Shstrndx: 1}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS], hdr.Ident[elf.EI_DATA], hdr.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1
	binary.Write(&body, le, shdrs)
	out := body.Bytes()
	var h bytes.Buffer
	binary.Write(&h, le, hdr)
	copy(out, h.Bytes())
	p := filepath.Join(t.TempDir(), "crafted.so")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// allocated returns the bytes the heap allocated while f ran. Tests of
// this package do not run in parallel, so nothing else allocates much
// meanwhile.
func allocated(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// longFDERows is the size of the crafted FDE: a million rows, 3 MB of CFI.
const longFDERows = 1_000_000

// TestLongFDEGen converts a crafted file whose one FDE has a million rows.
// In v3 that is too many for a function: it is left out, with the count,
// and the conversion streams the rows, allocating for 65536 SFrame rows
// at most, not hundreds of bytes per CFI row (817 MB before). In v2 the
// million rows are kept, and allocated once, not copied as they grow
// (505 MB before, four times the rows themselves).
func TestLongFDEGen(t *testing.T) {
	p := craftELF(t, longFDERows+1, craftEHFrame(craftEH, craftText, longFDERows), nil)
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r *Result
	n := allocated(func() { r, err = FromCFI(f, Options{}) })
	if err != nil {
		t.Fatal(err)
	}
	want := Skip{Start: craftText, End: craftText + longFDERows + 1, FDEOffset: 0x18, Reason: ReasonEncode,
		Detail: "1000001 rows; version 3 allows at most 65535 per function"}
	if len(r.Funcs) != 0 || len(r.Skipped) != 1 || r.Skipped[0] != want {
		t.Errorf("v3: %d functions, skipped %v; want the function left out: %v", len(r.Funcs), r.Skipped, want)
	}
	if limit := uint64(64 << 20); n > limit {
		t.Errorf("v3: FromCFI allocated %d MB for a %d-row FDE, more than %d MB", n>>20, longFDERows, limit>>20)
	}
	t.Logf("v3: FromCFI allocated %d MB", n>>20)

	n = allocated(func() { r, err = FromCFI(f, Options{Version: sframe.Version2}) })
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Funcs) != 1 || len(r.Funcs[0].Rows) != longFDERows+1 {
		t.Errorf("v2: %d functions, skipped %v; want one of %d rows", len(r.Funcs), r.Skipped, longFDERows+1)
	}
	// The rows take 88 MB; the slab is sized for 1.5 million.
	if limit := uint64(200 << 20); n > limit {
		t.Errorf("v2: FromCFI allocated %d MB for a %d-row FDE, more than %d MB", n>>20, longFDERows, limit>>20)
	}
	t.Logf("v2: FromCFI allocated %d MB", n>>20)
}

// TestLongFDEVerify verifies an SFrame function against the crafted
// million-row FDE. Verify streams the CFI rows: it allocates a bounded
// amount, not a copy of every row (1.4 GB before). The check itself
// still happens: the SFrame rows (CFA sp+16 then sp+24) disagree with
// every other CFI row, and 64 of those disagreements are listed.
func TestLongFDEVerify(t *testing.T) {
	size := uint32(longFDERows + 1)
	ra := sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -8, Fixed: true}
	sp := arch.AMD64RSP
	fn := sframe.EncFunc{Start: craftText, Size: size, Rows: []sframe.EncRow{
		{StartOff: 0, Row: sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: sp, Offset: 8}, RA: ra}},
		{StartOff: 1, Row: sframe.Row{CFA: sframe.Rule{Kind: sframe.RuleValue, Base: sp, Offset: 24}, RA: ra}},
	}}
	sf, err := sframe.Encode(sframe.EncodeOptions{Version: sframe.Version3, ABI: sframe.ABIAMD64LE, Addr: craftSFrame}, []sframe.EncFunc{fn})
	if err != nil {
		t.Fatal(err)
	}
	p := craftELF(t, uint64(size), craftEHFrame(craftEH, craftText, longFDERows), sf)
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rep *Report
	n := allocated(func() { rep, err = VerifyELF(f, VerifyELFOptions{}) })
	if err != nil {
		t.Fatal(err)
	}
	// Rows 1, 3, 5 ... (CFA rsp+16) disagree with the SFrame's rsp+24.
	if rep.Funcs != 1 || rep.PCs != longFDERows+1 || len(rep.Disagreements) != maxPerFunc ||
		rep.MoreDisagreements != longFDERows/2-maxPerFunc || rep.Disagreements[0].PC != craftText+1 {
		t.Errorf("%d functions, %d PCs, %d+%d disagreements (first %v); want 1, %d, %d+%d at %#x",
			rep.Funcs, rep.PCs, len(rep.Disagreements), rep.MoreDisagreements, rep.Disagreements[:1],
			longFDERows+1, maxPerFunc, longFDERows/2-maxPerFunc, craftText+1)
	}
	if limit := uint64(64 << 20); n > limit {
		t.Errorf("VerifyELF allocated %d MB for a %d-row FDE, more than %d MB", n>>20, longFDERows, limit>>20)
	}
	t.Logf("VerifyELF allocated %d MB", n>>20)
}
