package cfi

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
)

// x86-64-like CIE: CFA = rsp+8, return address at CFA-8.
var stdCIE = cat([]byte{byte(OpDefCFA)}, uleb(7), uleb(8), []byte{byte(OpOffset) | 16}, uleb(1))

func adv(n byte) []byte { return []byte{byte(OpAdvanceLoc) | n} }

// TestOpcodes checks the rows produced by every call frame instruction.
func TestOpcodes(t *testing.T) {
	o := binary.LittleEndian
	cases := []struct {
		name  string
		instr []byte
		want  []string
	}{
		{"nop", []byte{0, 0, 0}, []string{"[1000,1100) cfa=r7+8 r16=c-8"}},
		{"advance_loc", cat(adv(4), []byte{byte(OpDefCFAOffset)}, uleb(16)),
			[]string{"[1000,1004) cfa=r7+8 r16=c-8", "[1004,1100) cfa=r7+16 r16=c-8"}},
		{"advance_loc1", cat([]byte{byte(OpAdvanceLoc1), 0x80, byte(OpDefCFAOffset)}, uleb(16)),
			[]string{"[1000,1080) cfa=r7+8 r16=c-8", "[1080,1100) cfa=r7+16 r16=c-8"}},
		{"advance_loc2", cat([]byte{byte(OpAdvanceLoc2)}, u16(o, 0x90), []byte{byte(OpUndefined)}, uleb(16)),
			[]string{"[1000,1090) cfa=r7+8 r16=c-8", "[1090,1100) cfa=r7+8 r16=undefined"}},
		{"advance_loc4", cat([]byte{byte(OpAdvanceLoc4)}, u32(o, 0xa0), []byte{byte(OpSameValue)}, uleb(3)),
			[]string{"[1000,10a0) cfa=r7+8 r16=c-8", "[10a0,1100) cfa=r7+8 r3=same_value r16=c-8"}},
		{"MIPS_advance_loc8", cat([]byte{byte(OpMIPSAdvanceLoc8)}, u64(o, 0x10), []byte{byte(OpDefCFARegister)}, uleb(6)),
			[]string{"[1000,1010) cfa=r7+8 r16=c-8", "[1010,1100) cfa=r6+8 r16=c-8"}},
		{"set_loc", cat([]byte{byte(OpSetLoc)}, u64(o, 0x1040), []byte{byte(OpDefCFA)}, uleb(6), uleb(16)),
			[]string{"[1000,1040) cfa=r7+8 r16=c-8", "[1040,1100) cfa=r6+16 r16=c-8"}},
		{"zero advance is not a row", cat(adv(0), adv(2)),
			[]string{"[1000,1002) cfa=r7+8 r16=c-8", "[1002,1100) cfa=r7+8 r16=c-8"}},
		{"offset", cat([]byte{byte(OpOffset) | 6}, uleb(2)),
			[]string{"[1000,1100) cfa=r7+8 r6=c-16 r16=c-8"}},
		{"offset_extended", cat([]byte{byte(OpOffsetExtended)}, uleb(70), uleb(3)),
			[]string{"[1000,1100) cfa=r7+8 r16=c-8 r70=c-24"}},
		{"offset_extended_sf", cat([]byte{byte(OpOffsetExtendedSF)}, uleb(3), sleb(-2)),
			[]string{"[1000,1100) cfa=r7+8 r3=c+16 r16=c-8"}},
		{"val_offset", cat([]byte{byte(OpValOffset)}, uleb(7), uleb(0)),
			[]string{"[1000,1100) cfa=r7+8 r7=v+0 r16=c-8"}},
		{"val_offset_sf", cat([]byte{byte(OpValOffsetSF)}, uleb(12), sleb(1)),
			[]string{"[1000,1100) cfa=r7+8 r12=v-8 r16=c-8"}},
		{"GNU_negative_offset_extended", cat([]byte{byte(OpGNUNegativeOffsetExtended)}, uleb(3), uleb(2)),
			[]string{"[1000,1100) cfa=r7+8 r3=c+16 r16=c-8"}},
		{"register", cat([]byte{byte(OpRegister)}, uleb(16), uleb(11)),
			[]string{"[1000,1100) cfa=r7+8 r16=r11"}},
		{"undefined", cat([]byte{byte(OpUndefined)}, uleb(16)),
			[]string{"[1000,1100) cfa=r7+8 r16=undefined"}},
		{"same_value", cat([]byte{byte(OpSameValue)}, uleb(6)),
			[]string{"[1000,1100) cfa=r7+8 r6=same_value r16=c-8"}},
		{"restore", cat([]byte{byte(OpOffset) | 16}, uleb(2), []byte{byte(OpOffset) | 6}, uleb(3), adv(1), []byte{byte(OpRestore) | 16, byte(OpRestore) | 6}),
			[]string{"[1000,1001) cfa=r7+8 r6=c-24 r16=c-16", "[1001,1100) cfa=r7+8 r16=c-8"}},
		{"restore_extended", cat([]byte{byte(OpUndefined)}, uleb(16), adv(1), []byte{byte(OpRestoreExtended)}, uleb(16)),
			[]string{"[1000,1001) cfa=r7+8 r16=undefined", "[1001,1100) cfa=r7+8 r16=c-8"}},
		{"def_cfa", cat([]byte{byte(OpDefCFA)}, uleb(6), uleb(32)),
			[]string{"[1000,1100) cfa=r6+32 r16=c-8"}},
		{"def_cfa_sf", cat([]byte{byte(OpDefCFASF)}, uleb(6), sleb(-2)),
			[]string{"[1000,1100) cfa=r6+16 r16=c-8"}},
		{"def_cfa_register", cat([]byte{byte(OpDefCFARegister)}, uleb(6)),
			[]string{"[1000,1100) cfa=r6+8 r16=c-8"}},
		{"def_cfa_offset", cat([]byte{byte(OpDefCFAOffset)}, uleb(200008)),
			[]string{"[1000,1100) cfa=r7+200008 r16=c-8"}},
		{"def_cfa_offset_sf", cat([]byte{byte(OpDefCFAOffsetSF)}, sleb(-4)),
			[]string{"[1000,1100) cfa=r7+32 r16=c-8"}},
		{"def_cfa_expression", cat([]byte{byte(OpDefCFAExpression)}, uleb(3), []byte{0x76, 0x78, 0x06}),
			[]string{"[1000,1100) cfa=expr(767806) r16=c-8"}},
		{"expression", cat([]byte{byte(OpExpression)}, uleb(6), uleb(2), []byte{0x76, 0x00}),
			[]string{"[1000,1100) cfa=r7+8 r6=exp(7600) r16=c-8"}},
		{"val_expression", cat([]byte{byte(OpValExpression)}, uleb(6), uleb(2), []byte{0x32, 0x22}),
			[]string{"[1000,1100) cfa=r7+8 r6=vexp(3222) r16=c-8"}},
		{"remember/restore nested", cat(
			[]byte{byte(OpRememberState), byte(OpDefCFAOffset)}, uleb(16), []byte{byte(OpOffset) | 6}, uleb(2), adv(1),
			[]byte{byte(OpRememberState), byte(OpDefCFAOffset)}, uleb(24), []byte{byte(OpOffset) | 3}, uleb(3), adv(1),
			[]byte{byte(OpRememberState), byte(OpDefCFARegister)}, uleb(6), adv(1),
			[]byte{byte(OpRestoreState)}, adv(1),
			[]byte{byte(OpRestoreState)}, adv(1),
			[]byte{byte(OpRestoreState)}),
			[]string{
				"[1000,1001) cfa=r7+16 r6=c-16 r16=c-8",
				"[1001,1002) cfa=r7+24 r3=c-24 r6=c-16 r16=c-8",
				"[1002,1003) cfa=r6+24 r3=c-24 r6=c-16 r16=c-8",
				"[1003,1004) cfa=r7+24 r3=c-24 r6=c-16 r16=c-8",
				"[1004,1005) cfa=r7+16 r6=c-16 r16=c-8",
				"[1005,1100) cfa=r7+8 r16=c-8",
			}},
		{"GNU_args_size", cat([]byte{byte(OpGNUArgsSize)}, uleb(32)),
			[]string{"[1000,1100) cfa=r7+8 r16=c-8 args=32"}},
		{"AArch64 negate_ra_state", cat([]byte{byte(OpAArch64NegateRAState)}, adv(4), []byte{byte(OpAArch64NegateRAState)}),
			[]string{"[1000,1004) cfa=r7+8 r16=c-8 signed", "[1004,1100) cfa=r7+8 r16=c-8"}},
		{"AArch64 negate_ra_state_with_pc", []byte{byte(OpAArch64NegateRAStateWithPC)},
			[]string{"[1000,1100) cfa=r7+8 r16=c-8 signed"}},
	}
	for _, c := range cases {
		s := newSection(EHFrame)
		cie := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
		s.AbsFDE(cie, 0x1000, 0x100, false, c.instr)
		got, err := rowsOf(s.table(0))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
		// The lookup path must agree with the stream at every address.
		tab := s.table(0)
		ut := tab.NewUnwindTable(mustFDE(t, tab))
		for ut.Next() {
			want := fmtRow(ut.Row())
			for _, pc := range []uint64{ut.Row().Start, ut.Row().End - 1} {
				r, err := lookup(tab, pc)
				if err != nil || fmtRow(&r) != want {
					t.Errorf("%s: RowForPC(%#x) = %q, %v; want %q", c.name, pc, fmtRow(&r), err, want)
				}
			}
		}
	}
}

func mustFDE(t *testing.T, tab *Table) *FDE {
	it := tab.Entries()
	for it.Next() {
		if e := it.Entry(); e.Kind == KindFDE {
			if e.Err != nil {
				t.Fatal(e.Err)
			}
			f := *e.FDE
			return &f
		}
	}
	t.Fatal("no FDE")
	return nil
}

// TestCodeAlignment checks that advances are scaled by the code alignment
// factor and offsets by the data alignment factor.
func TestCodeAlignment(t *testing.T) {
	s := newSection(EHFrame)
	cie := s.CIE(1, "", nil, 4, -4, 30, cat([]byte{byte(OpDefCFA)}, uleb(31), uleb(0)))
	s.AbsFDE(cie, 0x2000, 0x40, false, cat(adv(2), []byte{byte(OpDefCFAOffset)}, uleb(32), []byte{byte(OpOffset) | 29}, uleb(8), []byte{byte(OpOffset) | 30}, uleb(7)))
	got, err := rowsOf(s.table(0))
	want := []string{"[2000,2008) cfa=r31+0", "[2008,2040) cfa=r31+32 r29=c-32 r30=c-28"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}

// TestRestoreStateErrors checks unmatched restore_state and unknown opcodes.
func TestRestoreStateErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		instr []byte
		msg   string
	}{
		{"unmatched restore", []byte{byte(OpRestoreState)}, "without DW_CFA_remember_state"},
		{"unknown opcode", []byte{0x17}, "unknown call frame instruction 0x17"},
		{"user opcode", []byte{0x1e}, "unknown call frame instruction 0x1e"},
		{"truncated uleb", []byte{byte(OpDefCFAOffset), 0x80}, "truncated"},
		{"truncated advance", []byte{byte(OpAdvanceLoc4), 1, 2}, "truncated"},
		{"expression too long", cat([]byte{byte(OpDefCFAExpression)}, uleb(100), []byte{1}), "exceeds the entry"},
	} {
		s := newSection(EHFrame)
		cie := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
		s.AbsFDE(cie, 0x1000, 0x100, false, c.instr)
		tab := s.table(0)
		_, err := rowsOf(tab)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Msg, c.msg) {
			t.Errorf("%s: error %v, want *Error containing %q", c.name, err, c.msg)
		}
		if _, err := lookup(tab, 0x1000); err == nil {
			t.Errorf("%s: RowForPC succeeded on a bad program", c.name)
		}
	}
}

// TestDeepRemember checks that remember_state nests to large depths.
func TestDeepRemember(t *testing.T) {
	const depth = 5000
	var instr []byte
	for i := 0; i < depth; i++ {
		instr = append(instr, byte(OpRememberState), byte(OpDefCFAOffset))
		instr = append(instr, uleb(uint64(i+16))...)
	}
	instr = append(instr, adv(1)...)
	for i := 0; i < depth; i++ {
		instr = append(instr, byte(OpRestoreState))
	}
	s := newSection(EHFrame)
	cie := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
	s.AbsFDE(cie, 0x1000, 0x100, false, instr)
	got, err := rowsOf(s.table(0))
	want := []string{"[1000,1001) cfa=r7+5015 r16=c-8", "[1001,1100) cfa=r7+8 r16=c-8"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
}

// TestSortIndex checks both index sorts against a simple stable sort.
func TestSortIndex(t *testing.T) {
	for _, runs := range []int{1, 2, 5, 64, 65, 500} {
		var ix []indexEntry
		for r := 0; r < runs; r++ {
			for i := 0; i < 2000/runs+1; i++ {
				ix = append(ix, indexEntry{begin: uint64((i*7919+r*104729)%5000) << (r % 3 * 8), off: uint64(len(ix))})
			}
			sortRun := ix[len(ix)-(2000/runs+1):]
			for i := 1; i < len(sortRun); i++ { // make each run ascending
				for j := i; j > 0 && sortRun[j].begin < sortRun[j-1].begin; j-- {
					sortRun[j], sortRun[j-1] = sortRun[j-1], sortRun[j]
				}
			}
		}
		want := append([]indexEntry(nil), ix...)
		for i := 1; i < len(want); i++ {
			for j := i; j > 0 && (want[j].begin < want[j-1].begin); j-- {
				want[j], want[j-1] = want[j-1], want[j]
			}
		}
		got := append([]indexEntry(nil), ix...)
		sortIndex(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d runs: sortIndex differs from a stable sort", runs)
		}
		got = append(got[:0], ix...)
		radixSort(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d runs: radixSort differs from a stable sort", runs)
		}
	}
}

// TestManyRules checks rows with more rules than fit inline: streaming,
// lookups, and that returned rows do not share storage.
func TestManyRules(t *testing.T) {
	var instr []byte
	for r := 0; r < inlineRules+10; r++ {
		instr = append(instr, byte(OpOffsetExtended))
		instr = append(instr, uleb(uint64(100+r))...)
		instr = append(instr, uleb(uint64(r+1))...)
	}
	instr = append(instr, adv(4)...)
	instr = append(instr, byte(OpRestoreExtended))
	instr = append(instr, uleb(100)...)
	s := newSection(EHFrame)
	cie := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
	s.AbsFDE(cie, 0x1000, 0x10, false, instr)
	tab := s.table(0)
	a, err := lookup(tab, 0x1000)
	if err != nil || a.NumRules() != inlineRules+11 {
		t.Fatalf("first row: %d rules, %v", a.NumRules(), err)
	}
	b, err := lookup(tab, 0x1008)
	if err != nil || b.NumRules() != inlineRules+10 {
		t.Fatalf("second row: %d rules, %v", b.NumRules(), err)
	}
	for r := 0; r < inlineRules+10; r++ {
		if got := a.Rule(arch.Reg(100 + r)); got.Kind != RuleOffset || got.Offset != int64(-8*(r+1)) {
			t.Fatalf("first row r%d: %+v (storage shared with a later lookup?)", 100+r, got)
		}
	}
	if b.Rule(100).Kind != RuleUnspecified || b.Rule(133).Offset != -8*34 {
		t.Errorf("second row: r100 %+v r133 %+v", b.Rule(100), b.Rule(133))
	}
	if rs := a.Rules(); len(rs) != a.NumRules() || rs[len(rs)-1].Column != 133 || rs[0].Column != 16 {
		t.Errorf("Rules(): %d rules, first %d last %d", len(rs), rs[0].Column, rs[len(rs)-1].Column)
	}
}

// TestHdrBucketsMatchSearch checks the bucketed header lookup against a
// plain search of the same keys, at every key, between keys and outside
// the range, on this machine's libc and on synthetic tables.
func TestHdrBucketsMatchSearch(t *testing.T) {
	var hdrs []*EHFrameHdr
	if f, err := elf.Open("/usr/lib/x86_64-linux-gnu/libc.so.6"); err == nil {
		if s := f.Section(".eh_frame_hdr"); s != nil {
			data, _ := s.Data()
			if h, err := ParseEHFrameHdr(data, s.Addr, f.ByteOrder, 8); err == nil {
				hdrs = append(hdrs, h)
			}
		}
		f.Close()
	}
	for _, keys := range [][]int32{{5}, {-100, -100, 3, 4, 1 << 20}, {0, 1, 2, 3, 4, 5, 6, 7}, {-1 << 31, 0, 1<<31 - 1}} {
		h := &EHFrameHdr{keys: keys}
		h.buildBuckets()
		hdrs = append(hdrs, h)
	}
	for hi, h := range hdrs {
		if h.buckets == nil {
			t.Fatalf("table %d: no buckets built", hi)
		}
		var probes []int64
		for _, k := range h.keys {
			probes = append(probes, int64(k)-1, int64(k), int64(k)+1)
		}
		probes = append(probes, -1<<40, 1<<40)
		for _, v := range probes {
			if got, want := h.bucketLE(v), lastLE(h.keys, v); got != want && !(got >= 0 && want >= 0 && h.keys[got] == h.keys[want]) {
				t.Errorf("table %d: lookup %d: buckets give %d, search %d", hi, v, got, want)
			}
		}
	}
	// Keys out of order: no buckets, the search stays in use.
	h := &EHFrameHdr{keys: []int32{4, 2, 9}}
	h.buildBuckets()
	if h.buckets != nil {
		t.Error("buckets built over unsorted keys")
	}
}
