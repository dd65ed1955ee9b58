package sframegen

import (
	"debug/elf"
	"encoding/binary"
	"os"
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
				if data, err := elffile.SectionData(ef, s, elffile.RelocatedLenient); err == nil {
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
		tab, err := cfi.New(data, cfi.Options{Addr: addr, ByteOrder: order, AddrSize: 8, Arch: abi.Arch()})
		if err != nil {
			return
		}
		r, err := FromCFITable(tab, abi, Options{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		r.Dedupe()
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
		tab2, _ := cfi.New(data, cfi.Options{Addr: addr, ByteOrder: order, AddrSize: 8, Arch: abi.Arch()})
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
			if data, err := elffile.SectionData(ef, s, elffile.Unrelocated); err == nil {
				f.Add(data, s.Addr, byte(len(tabs)-1))
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, addr uint64, which byte) {
		s, err := sframe.Parse(data, addr)
		if err != nil {
			return
		}
		tab := tabs[int(which)%len(tabs)] // immutable: shared by every run
		rep, err := Verify(tab, s, VerifyOptions{Relocatable: which&0x80 != 0})
		if err == nil && (rep.Disagreements == nil || rep.LeftOut == nil) {
			t.Fatal("nil lists in a report")
		}
	})
}

// FuzzToVersion converts arbitrary ELF images and bare sections
// (seeded with small corpus files of every kind and their .sframe) to
// version 2 and 3, dropping what cannot be expressed. It must not panic,
// and an image that elffile.NewFile opens (as sframe convert checks
// first) converts into one that opens too, with an SFrame section that
// parses and validates.
func FuzzToVersion(f *testing.F) {
	if d, ok := corpus.Find(); ok {
		for _, name := range []string{"x86_64/v3/edge-x86_64.o", "x86_64/v2/basic-O2.o", "x86_64/v3/drap-O2.elf",
			"x86_64/v1/basic-O2.elf", "aarch64/v3/edge-aarch64.o", "s390x/v3/drap-O2.elf"} {
			src, err := os.ReadFile(filepath.Join(d, name))
			if err != nil || len(src) > 64<<10 {
				continue
			}
			f.Add(src, false, byte(2))
			f.Add(src, false, byte(3))
			if ef, err := elffile.NewFile(src); err == nil {
				if s := elffile.FindSFrame(ef.File, ""); s != nil {
					if data, err := elffile.SectionData(ef.File, s, elffile.Unrelocated); err == nil {
						f.Add(data, true, byte(2))
					}
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, raw bool, vB byte) {
		opts := ToVersionOptions{Version: sframe.Version(vB%2 + 2), DropUnrepresentable: true}
		if raw {
			if r, err := ToVersionRaw(data, 0x1000, opts); err == nil {
				if _, err := sframe.Parse(r.Data, 0x1000); err != nil {
					t.Fatalf("converted section does not parse: %v", err)
				}
			}
			return
		}
		r, err := ToVersion(data, opts)
		if err != nil {
			return
		}
		if _, err := elffile.NewFile(data); err != nil {
			return
		}
		ef, err := elffile.NewFile(r.Data)
		if err != nil {
			t.Fatalf("converted image does not open: %v", err)
		}
		sec := elffile.FindSFrame(ef.File, "")
		if sec == nil {
			t.Fatal("converted image has no SFrame section")
		}
		sd, err := elffile.SectionData(ef.File, sec, elffile.Relocated)
		if err != nil {
			t.Fatal(err)
		}
		s, err := sframe.Parse(sd, sec.Addr)
		if err != nil {
			t.Fatalf("converted section does not parse: %v", err)
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("converted section does not validate: %v", err)
		}
	})
}
