package cfi

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/internal/elftest"
)

// TestSetLocPCRel checks DW_CFA_set_loc in a pcrel FDE encoding: the
// operand is relative to its own address in the section, as readelf and
// unwinders read it (it was taken relative to the start of the program's
// bytes), through the lookup and through Dump compared with readelf.
func TestSetLocPCRel(t *testing.T) {
	const secAddr = 0x10000
	le := binary.LittleEndian
	s := newSection(EHFrame)
	cie := s.cie(1, "zR", []byte{byte(PEPCRel | PESData4)}, 1, -8, 16, stdCIE)
	beginField := secAddr + uint64(len(s.b)) + 8 // after the FDE's length and CIE pointer
	body := u32(le, uint32(0x1000-beginField))
	body = append(body, u32(le, 0x100)...)
	body = append(body, 0) // no augmentation data
	body = append(body, adv(4)...)
	setLocField := beginField + uint64(len(body)) + 1
	body = append(body, byte(OpSetLoc))
	body = append(body, u32(le, uint32(0x1040-setLocField))...)
	body = append(body, byte(OpDefCFAOffset), 32)
	body = append(body, adv(4)...)
	s.fde(cie, body)

	r, err := lookup(s.table(secAddr), 0x1040)
	if err != nil || r.Start != 0x1040 || r.End != 0x1044 || r.CFA.Offset != 32 {
		t.Errorf("RowForPC(0x1040) = %s, %v; want [1040,1044) cfa=r7+32", fmtRow(&r), err)
	}

	img := elftest.Build(elf.ET_EXEC, []elftest.Section{
		{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: 0x1000, Data: make([]byte, 0x100)},
		{Name: ".eh_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: secAddr, Data: s.b},
	})
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := Dump(&got, f, ".eh_frame"); err != nil {
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
		t.Errorf("Dump differs from readelf:\ngot:\n%s\nwant:\n%s", got.Bytes(), want)
	}
}
