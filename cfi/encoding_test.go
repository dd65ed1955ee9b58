package cfi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/byteorder"
)

// TestReadEncoded checks every pointer format and application.
func TestReadEncoded(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	deref := func(addr uint64, size int) (uint64, error) {
		if addr == 0x5008 {
			return 0xdeadbeef, nil
		}
		return 0, fmt.Errorf("unmapped %#x", addr)
	}
	cases := []struct {
		name  string
		enc   PtrEnc
		data  []byte
		pos   int // where the value starts
		size  int // address size
		order binary.ByteOrder
		want  uint64
		next  int // position after the value
		err   string
	}{
		{"absptr8", PEAbsPtr, u64(le, 0x1122334455667788), 0, 8, le, 0x1122334455667788, 8, ""},
		{"absptr4", PEAbsPtr, u32(le, 0x80000000), 0, 4, le, 0x80000000, 4, ""},
		{"absptr4 big-endian", PEAbsPtr, u32(be, 0x01020304), 0, 4, be, 0x01020304, 4, ""},
		{"uleb128", PEULEB128, uleb(624485), 0, 8, le, 624485, 3, ""},
		{"sleb128", PESLEB128, sleb(-123456), 0, 8, le, uint64(0xfffffffffffe1dc0), 3, ""},
		{"udata2", PEUData2, u16(le, 0xfffe), 0, 8, le, 0xfffe, 2, ""},
		{"udata4", PEUData4, u32(le, 0xfffffffe), 0, 8, le, 0xfffffffe, 4, ""},
		{"udata8", PEUData8, u64(le, 0xfffffffffffffffe), 0, 8, le, 0xfffffffffffffffe, 8, ""},
		{"sdata2", PESData2, u16(le, 0xfffe), 0, 8, le, ^uint64(1), 2, ""},
		{"sdata4", PESData4, u32(le, 0xfffffffe), 0, 8, le, ^uint64(1), 4, ""},
		{"sdata8", PESData8, u64(le, 0xfffffffffffffffe), 0, 8, le, ^uint64(1), 8, ""},
		{"sdata4 big-endian", PESData4, u32(be, 0xfffffff0), 0, 8, be, ^uint64(15), 4, ""},
		// pcrel: relative to the address of the value itself (section
		// address 0x4000 + position 4).
		{"pcrel sdata4", PEPCRel | PESData4, cat([]byte{0, 0, 0, 0}, u32(le, 0xfffffff0)), 4, 8, le, 0x4004 - 16, 8, ""},
		{"textrel udata4", PETextRel | PEUData4, u32(le, 0x10), 0, 8, le, 0x1000 + 0x10, 4, ""},
		{"datarel sdata4", PEDataRel | PESData4, u32(le, 0xfffffff8), 0, 8, le, 0x3000 - 8, 4, ""},
		{"funcrel uleb128", PEFuncRel | PEULEB128, uleb(0x20), 0, 8, le, 0x7000 + 0x20, 1, ""},
		// aligned: skip to the next multiple of the address size
		// (address 0x4003 -> 0x4008, 5 bytes of padding).
		{"aligned", PEAligned, cat([]byte{0, 0, 0, 0, 0, 0, 0, 0}, u64(le, 0xabc)), 3, 8, le, 0xabc, 16, ""},
		{"indirect", PEIndirect | PEDataRel | PEUData4, u32(le, 0x2008), 0, 8, le, 0xdeadbeef, 4, ""},
		{"indirect unresolvable", PEIndirect | PEUData4, u32(le, 0x9999), 0, 8, le, 0, 0, "unmapped"},
		{"omit", PEOmit, nil, 0, 8, le, 0, 0, ""},
		{"truncated", PEUData4, []byte{1, 2}, 0, 8, le, 0, 0, "truncated"},
		{"bad format", PtrEnc(0x05), []byte{1, 2, 3, 4}, 0, 8, le, 0, 0, "unknown pointer encoding"},
		{"bad application", PtrEnc(0x60) | PEUData4, []byte{1, 2, 3, 4}, 0, 8, le, 0, 0, "unknown pointer application"},
	}
	for _, c := range cases {
		b := buf{data: c.data, pos: c.pos, order: byteorder.Of(c.order)}
		ctx := ptrCtx{secAddr: 0x4000, addrSize: c.size, text: 0x1000, data: 0x3000, funcBase: 0x7000, deref: deref}
		got, err := b.readEncoded(c.enc, &ctx)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %#x, %v; want %#x", c.name, got, err, c.want)
		}
		if c.enc != PEOmit && b.pos != c.next {
			t.Errorf("%s: position %d, want %d", c.name, b.pos, c.next)
		}
	}
}

// TestPtrEncString checks the readelf-style names.
func TestPtrEncString(t *testing.T) {
	for enc, want := range map[PtrEnc]string{
		0x1b: "sdata4, pcrel", 0x3b: "sdata4, datarel", 0x03: "udata4, absolute",
		0xff: "omit", 0x9b: "sdata4, <unknown application method>", 0x01: "uleb128, absolute",
	} {
		if got := enc.String(); got != want {
			t.Errorf("%#x: %q, want %q", uint8(enc), got, want)
		}
	}
	if OpDefCFA.String() != "DW_CFA_def_cfa" || Op(0x86).String() != "DW_CFA_offset" || Op(0x3e).String() != "DW_CFA_0x3e" {
		t.Error("Op.String")
	}
	if RuleValExpression.String() != "val_expression" || CFAExpression.String() != "expression" || KindFDE.String() != "FDE" {
		t.Error("kind String")
	}
}

// TestAugmentations checks z, R, P, L, S, B, G and unknown letters.
func TestAugmentations(t *testing.T) {
	le := binary.LittleEndian
	s := newSection(EHFrame)
	s.Order = le
	// "zPLR": personality (udata4 absolute), LSDA pcrel sdata4, FDE pcrel sdata4.
	augPLR := cat([]byte{byte(PEUData4)}, u32(le, 0x401000), []byte{byte(PEPCRel | PESData4), byte(PEPCRel | PESData4)})
	c1 := s.CIE(1, "zPLR", augPLR, 1, -8, 16, stdCIE)
	// FDE: pc_begin pcrel to itself, range, aug data with LSDA.
	fdeStart := len(s.B)
	pcPos := fdeStart + 8 // after length and CIE pointer
	body := cat(u32(le, uint32(0x1000-(0x100000+pcPos))), u32(le, 0x20))
	lsdaPos := pcPos + 8 + 1
	body = append(body, 4)
	body = append(body, u32(le, uint32(0x600000-(0x100000+lsdaPos)))...)
	body = append(body, 0) // nop
	s.FDE(c1, body)
	// "zRS": signal frame.
	c2 := s.CIE(1, "zRS", []byte{byte(PEUData8)}, 1, -8, 16, stdCIE)
	s.FDE(c2, cat(u64(le, 0x2000), u64(le, 0x10), []byte{0}))
	// "zRX" with a following unknown letter and data: R is read, the rest
	// skipped by the 'z' length, instructions still found.
	c3 := s.CIE(1, "zRX", []byte{byte(PEUData8), 0xaa, 0xbb}, 1, -8, 16, stdCIE)
	s.FDE(c3, cat(u64(le, 0x3000), u64(le, 0x10), []byte{0, byte(OpDefCFAOffset)}, uleb(24)))
	// "zRBG" on AArch64.
	c4 := s.CIE(1, "zRBG", []byte{byte(PEUData8)}, 4, -8, 30, nil)
	s.FDE(c4, cat(u64(le, 0x4000), u64(le, 0x10), []byte{0}))

	tab, err := New(s.B, Options{Kind: EHFrame, Addr: 0x100000, ByteOrder: le, AddrSize: 8, Arch: arch.ARM64})
	if err != nil {
		t.Fatal(err)
	}
	var fdes []FDE
	it := tab.Entries()
	for it.Next() {
		e := it.Entry()
		if e.Err != nil {
			t.Fatalf("entry %#x: %v", e.Offset, e.Err)
		}
		if e.Kind == KindFDE {
			fdes = append(fdes, *e.FDE)
		}
	}
	if len(fdes) != 4 {
		t.Fatalf("%d FDEs", len(fdes))
	}
	f := fdes[0]
	if f.CIE.Personality != 0x401000 || f.CIE.PersonalityEncoding != PEUData4 || f.CIE.LSDAEncoding != PEPCRel|PESData4 || f.CIE.FDEEncoding != PEPCRel|PESData4 {
		t.Errorf("zPLR CIE: %+v", f.CIE)
	}
	if f.PCBegin != 0x1000 || f.PCEnd != 0x1020 || !f.HasLSDA || f.LSDA != 0x600000 {
		t.Errorf("zPLR FDE: begin %#x end %#x lsda %v %#x", f.PCBegin, f.PCEnd, f.HasLSDA, f.LSDA)
	}
	if !fdes[1].CIE.SignalFrame || fdes[0].CIE.SignalFrame {
		t.Error("S flag")
	}
	if fdes[2].PCBegin != 0x3000 || fdes[2].CIE.FDEEncoding != PEUData8 {
		t.Errorf("zRX: %+v", fdes[2])
	}
	if r, err := lookup(tab, 0x3004); err != nil || r.CFA.Offset != 24 {
		t.Errorf("zRX rules: %+v %v", r.CFA, err)
	}
	if !fdes[3].CIE.BKey || !fdes[3].CIE.MTETagged || fdes[3].CIE.CodeAlign != 4 || fdes[3].CIE.RA != 30 {
		t.Errorf("zRBG: %+v", fdes[3].CIE)
	}
}

// TestDebugFrame checks .debug_frame with CIE versions 1, 3 and 4, in 32-
// and 64-bit DWARF, including CIE pointers that are section offsets.
func TestDebugFrame(t *testing.T) {
	for _, is64 := range []bool{false, true} {
		for _, version := range []byte{1, 3, 4} {
			s := newSection(DebugFrame)
			s.Is64 = is64
			ra := uint64(16)
			if version > 1 {
				ra = 300 // needs ULEB128 (version 3+)
			}
			c := s.CIE(version, "", nil, 1, -8, ra, stdCIE)
			s.AbsFDE(c, 0x1000, 0x10, false, cat(adv(1), []byte{byte(OpDefCFAOffset)}, uleb(16)))
			s.AbsFDE(c, 0x1010, 0x10, false, nil)
			tab := s.table(0)
			var fdes int
			it := tab.Entries()
			for it.Next() {
				e := it.Entry()
				if e.Err != nil {
					t.Fatalf("v%d 64=%v: %v", version, is64, e.Err)
				}
				if e.Kind == KindCIE && (e.CIE.Version != version || e.CIE.Format64 != is64 || uint64(e.CIE.RA) != ra) {
					t.Errorf("v%d 64=%v: CIE %+v", version, is64, e.CIE)
				}
				if e.Kind == KindFDE {
					fdes++
				}
			}
			if fdes != 2 {
				t.Errorf("v%d 64=%v: %d FDEs", version, is64, fdes)
			}
			r, err := lookup(tab, 0x1001)
			if err != nil || fmtRow(&r) != "[1001,1010) cfa=r7+16 r16=c-8" {
				t.Errorf("v%d 64=%v: %s %v", version, is64, fmtRow(&r), err)
			}
			r, err = lookup(tab, 0x101f)
			if err != nil || fmtRow(&r) != "[1010,1020) cfa=r7+8 r16=c-8" {
				t.Errorf("v%d 64=%v: %s %v", version, is64, fmtRow(&r), err)
			}
		}
	}
}

// TestMalformed checks that bad entries give errors carrying their offset
// and do not stop the good ones from being used.
func TestMalformed(t *testing.T) {
	le := binary.LittleEndian
	s := newSection(EHFrame)
	c := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
	good1 := s.AbsFDE(c, 0x1000, 0x10, false, nil)
	// CIE pointer that points nowhere (before the section start).
	badPtr := s.FDE(0, nil)
	le.PutUint32(s.B[badPtr+4:], 0x7fffffff)
	// CIE pointer to an FDE.
	toFDE := s.FDE(good1, cat(u64(le, 0x3000), u64(le, 0x10)))
	// Unsupported CIE version, and an FDE using it.
	badCIE := s.CIE(9, "", nil, 1, -8, 16, nil)
	viaBad := s.AbsFDE(badCIE, 0x4000, 0x10, false, nil)
	// Truncated FDE body (no range).
	trunc := s.FDE(c, u64(le, 0x5000))
	// Unknown opcode: its own error only.
	unk := s.AbsFDE(c, 0x6000, 0x10, false, []byte{0x3e})
	good2 := s.AbsFDE(c, 0x7000, 0x10, false, nil)
	// Finally an entry whose length runs past the end.
	bad := len(s.B)
	s.B = append(s.B, u32(le, 1000)...)
	s.B = append(s.B, 0, 0, 0, 0)

	tab := s.table(0)
	errs := map[uint64]string{}
	kinds := map[uint64]ErrKind{}
	var ok []uint64
	it := tab.Entries()
	for it.Next() {
		e := it.Entry()
		if e.Err != nil {
			var ce *Error
			if !errors.As(e.Err, &ce) || ce.Offset != e.Offset {
				t.Errorf("entry %#x: error %v does not carry its offset", e.Offset, e.Err)
			} else {
				kinds[e.Offset] = ce.Kind
			}
			errs[e.Offset] = e.Err.Error()
			continue
		}
		ok = append(ok, e.Offset)
	}
	if it.Err() == nil {
		t.Error("bad length did not end the walk with an error")
	} else if errs[uint64(bad)] == "" {
		var ce *Error
		if errors.As(it.Err(), &ce) {
			kinds[uint64(bad)] = ce.Kind
		}
		errs[uint64(bad)] = it.Err().Error()
	}
	for off, want := range map[uint64]struct {
		msg  string
		kind ErrKind
	}{badPtr: {"points before", ErrBadEntry}, toFDE: {"not a CIE", ErrBadEntry}, viaBad: {"unsupported CIE version", ErrBadEntry},
		badCIE: {"unsupported CIE version", ErrUnsupported}, trunc: {"truncated", ErrTruncated}, uint64(bad): {"runs past the end", ErrBounds}} {
		if !strings.Contains(errs[off], want.msg) || kinds[off] != want.kind {
			t.Errorf("entry %#x: error %q (%v), want %q (%v)", off, errs[off], kinds[off], want.msg, want.kind)
		}
	}
	if !reflect.DeepEqual(ok, []uint64{c, good1, unk, good2}) {
		t.Errorf("decoded entries %x", ok)
	}
	// Lookups still work for the good FDEs; the bad program fails alone.
	for _, pc := range []uint64{0x1000, 0x7008} {
		if _, err := lookup(tab, pc); err != nil {
			t.Errorf("RowForPC(%#x): %v", pc, err)
		}
	}
	var ce *Error
	if _, err := lookup(tab, 0x6000); !errors.As(err, &ce) || ce.Kind != ErrBadInstruction {
		t.Errorf("unknown opcode: %v, want an *Error of kind %v", err, ErrBadInstruction)
	}
	if _, err := lookup(tab, 0x4000); !errors.Is(err, ErrNoFDE) {
		t.Errorf("FDE with bad CIE is indexed: %v", err)
	}
}

// TestEHFrameHdr checks lookups through the binary-search table, and the
// fallback when the table is truncated.
func TestEHFrameHdr(t *testing.T) {
	le := binary.LittleEndian
	const ehAddr, hdrAddr = 0x20000, 0x1f000
	s := newSection(EHFrame)
	c := s.CIE(1, "zR", []byte{byte(PEUData8)}, 1, -8, 16, stdCIE)
	var offs []uint64
	for i := 0; i < 50; i++ {
		begin := uint64(0x1000 + i*0x40)
		offs = append(offs, s.FDE(c, cat(u64(le, begin), u64(le, 0x30), []byte{0}, []byte{byte(OpDefCFAOffset)}, uleb(uint64(16+i)))))
	}
	hdr := []byte{1, byte(PEPCRel | PESData4), byte(PEUData4), byte(PEDataRel | PESData4)}
	hdr = append(hdr, u32(le, uint32(ehAddr-(hdrAddr+4)))...)
	hdr = append(hdr, u32(le, uint32(len(offs)))...)
	for i, o := range offs {
		hdr = append(hdr, u32(le, uint32(0x1000+i*0x40-hdrAddr))...)
		hdr = append(hdr, u32(le, uint32(ehAddr+o-hdrAddr))...)
	}
	for _, truncate := range []bool{false, true} {
		h := hdr
		if truncate {
			h = hdr[:len(hdr)-3]
		}
		tab, err := New(s.B, Options{Kind: EHFrame, Addr: ehAddr, ByteOrder: le, AddrSize: 8, Hdr: h, HdrAddr: hdrAddr})
		if err != nil {
			t.Fatal(err)
		}
		if (tab.Hdr() != nil) == truncate {
			t.Errorf("truncate=%v: header used = %v", truncate, tab.Hdr() != nil)
		}
		for i := 0; i < 50; i++ {
			pc := uint64(0x1000 + i*0x40 + 0x10)
			r, err := lookup(tab, pc)
			if err != nil || r.CFA.Offset != int64(16+i) {
				t.Errorf("truncate=%v: RowForPC(%#x) = %+v, %v", truncate, pc, r.CFA, err)
			}
			// The gap after each FDE is not covered.
			if _, err := lookup(tab, pc+0x28); !errors.Is(err, ErrNoFDE) {
				t.Errorf("truncate=%v: gap %#x: %v", truncate, pc+0x28, err)
			}
		}
	}
	h, err := ParseEHFrameHdr(hdr, hdrAddr, le, 8)
	if err != nil || h.EHFramePtr != ehAddr || h.Count != 50 || h.Len() != 50 {
		t.Fatalf("header %+v %v", h, err)
	}
	if pc, fa, err := h.Entry(3); err != nil || pc != 0x10c0 || fa != ehAddr+offs[3] {
		t.Errorf("Entry(3) = %#x %#x %v", pc, fa, err)
	}
	if _, err := ParseEHFrameHdr([]byte{2, 0, 0, 0, 0, 0, 0, 0}, 0, le, 8); err == nil {
		t.Error("version 2 accepted")
	}
}

// TestNegativeRange checks an FDE whose sdata4 address range is negative
// (the high bit set), in the encoding linkers emit: it covers nothing,
// whichever decoder reads it (the fast one for short augmentation data,
// the general one for long), and no lookup returns it (the index used to
// take the range as unsigned and return the FDE for a PC it does not
// cover).
func TestNegativeRange(t *testing.T) {
	le := binary.LittleEndian
	for _, augLen := range []int{0, 200} {
		s := newSection(EHFrame)
		cie := s.CIE(1, "zR", []byte{byte(PEPCRel | PESData4)}, 1, -8, 16, stdCIE)
		beginField := uint64(len(s.B)) + 8
		body := u32(le, uint32(0x1000-beginField))  // begin 0x1000, section at 0
		body = append(body, u32(le, 0xfffffff0)...) // range -16
		body = append(body, uleb(uint64(augLen))...)
		body = append(body, make([]byte, augLen)...)
		body = append(body, adv(4)...)
		off := s.FDE(cie, body)
		tab := s.table(0)
		f, err := tab.FDEAt(off)
		if err != nil || f.PCBegin != 0x1000 || f.PCEnd != 0x1000-16 {
			t.Errorf("aug %d: FDE [%#x,%#x), %v; want [0x1000,0xff0)", augLen, f.PCBegin, f.PCEnd, err)
		}
		for _, pc := range []uint64{0x1000, 0x1004, 0x7fffffff} {
			if _, err := lookup(tab, pc); !errors.Is(err, ErrNoFDE) {
				t.Errorf("aug %d: RowForPC(%#x): %v, want ErrNoFDE", augLen, pc, err)
			}
			if _, err := tab.FindFDE(pc); !errors.Is(err, ErrNoFDE) {
				t.Errorf("aug %d: FindFDE(%#x): %v, want ErrNoFDE", augLen, pc, err)
			}
		}
	}
}
