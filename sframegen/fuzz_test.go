package sframegen

import (
	"debug/elf"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframe"
)

// FuzzFromCFI feeds arbitrary .eh_frame bytes to the converter, seeded
// with the CFI of corpus files. Conversion must not panic; whatever it
// produces must encode, parse, validate and agree with the same CFI.
func FuzzFromCFI(f *testing.F) {
	if d, ok := corpus.Find(); ok {
		for _, name := range []string{"x86_64/v3/edge-x86_64.o", "x86_64/v3/drap-O2.elf", "x86_64/v3/basic-pic.so",
			"aarch64/v3/edge-aarch64.o", "aarch64/v3/basic-pacb.elf", "s390x/v3/edge-s390x.o", "s390x/v3/drap-O2.elf"} {
			ef, err := elf.Open(filepath.Join(d, name))
			if err != nil {
				continue
			}
			abi, _ := ABIFor(ef)
			if s := ef.Section(".eh_frame"); s != nil {
				if data, err := cfi.SectionData(ef, s); err == nil {
					f.Add(data, s.Addr, byte(abi), byte(3))
					f.Add(data, s.Addr, byte(abi), byte(2))
				}
			}
			ef.Close()
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, addr uint64, abiB, vB byte) {
		abi := sframe.ABI(abiB%4 + 1)
		v := sframe.Version(vB%2 + 2)
		var order binary.ByteOrder = binary.LittleEndian
		if abi.BigEndian() {
			order = binary.BigEndian
		}
		tab, err := cfi.New(data, cfi.Options{Addr: addr, ByteOrder: order, AddrSize: 8, Arch: archOf(abi)})
		if err != nil {
			return
		}
		r, err := FromCFITable(tab, abi, Options{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		r.dedupe()
		out, err := r.Encode(0x10000)
		if err != nil {
			// Overlapping FDEs may still make an index the encoder
			// refuses; anything else is a converter bug.
			if len(r.Funcs) > 0 {
				t.Logf("encode: %v", err)
			}
			return
		}
		s, err := sframe.Parse(out, 0x10000)
		if err != nil {
			t.Fatalf("generated section does not parse: %v", err)
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("generated section does not validate: %v", err)
		}
		tab2, _ := cfi.New(data, cfi.Options{Addr: addr, ByteOrder: order, AddrSize: 8, Arch: archOf(abi)})
		if _, err := Verify(tab2, s, VerifyOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzVerify checks arbitrary SFrame bytes against the CFI of corpus
// files, seeded with their own .sframe sections. Verify must not panic:
// a section that does not validate is an error, anything else a report.
func FuzzVerify(f *testing.F) {
	d, ok := corpus.Find()
	if !ok {
		f.Skip("no corpus")
	}
	var tabs []*cfi.Table
	for _, name := range []string{"x86_64/v3/basic-O2.elf", "aarch64/v3/basic-pacb.elf", "s390x/v3/drap-O2.elf", "x86_64/v2/basic-pic.so"} {
		ef, err := elf.Open(filepath.Join(d, name))
		if err != nil {
			f.Fatal(err)
		}
		tab, err := cfi.FromELF(ef, "")
		if err != nil {
			f.Fatal(err)
		}
		tabs = append(tabs, tab)
		if s := elffile.FindSFrame(ef, ""); s != nil {
			if data, err := s.Data(); err == nil {
				f.Add(data, s.Addr, byte(len(tabs)-1))
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, addr uint64, which byte) {
		s, err := sframe.Parse(data, addr)
		if err != nil {
			return
		}
		tab := tabs[int(which)%len(tabs)].Clone()
		rep, err := Verify(tab, s, VerifyOptions{Relocatable: which&0x80 != 0})
		if err == nil && (rep.Disagreements == nil || rep.LeftOut == nil) {
			t.Fatal("nil lists in a report")
		}
	})
}
