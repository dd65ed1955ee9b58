package cfi

import (
	"bytes"
	"debug/elf"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/elftest"
	"github.com/sframekit/sframekit/internal/memtest"
)

// Tests of the limits on what a small hostile file may cost (issue 10).
// Each builds its input and measures the work's peak RSS in a child.

// TestDebugFrameBomb loads a file whose compressed
// .debug_frame declares, and really expands to, 1 GiB from 1 MiB
// (`sframe cfi --section .debug_frame` reached 6.65 GB of RSS on such a
// file). The section must be refused before it is decompressed (dump's
// TestDebugFrameBomb prints it).
func TestDebugFrameBomb(t *testing.T) {
	if memtest.InChild(t) {
		f, err := elf.NewFile(bytes.NewReader(elftest.Build(elf.ET_EXEC, []elftest.Section{
			{Name: ".debug_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED,
				Data: elftest.Chdr(elf.COMPRESS_ZLIB, 1<<30, elftest.ZlibZeros(1<<30))},
		})))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := FromELF(f, ".debug_frame"); !errors.Is(err, elffile.ErrTooLarge) {
			t.Errorf("FromELF: %v, want elffile.ErrTooLarge", err)
		}
		return
	}
	memtest.AtMost(t, 200<<20, "reading a 1 MiB file")
}

// rememberBomb is an .eh_frame whose one FDE is n DW_CFA_remember_state
// instructions, with no register rule anywhere, then an advance.
func rememberBomb(n int) *section {
	s := newSection(EHFrame)
	cie := s.CIE(1, "", nil, 1, -8, 16, cat([]byte{byte(OpDefCFA)}, uleb(7), uleb(8)))
	instr := bytes.Repeat([]byte{byte(OpRememberState)}, n)
	s.AbsFDE(cie, 0x1000, 0x100, false, append(instr, adv(1)...))
	return s
}

// TestRememberStateBomb runs 4 Mi remember_state instructions through
// the row stream and the lookup (issue 10: 1.06 GB and 7.7 s for a 4 MB
// file, 3.7 GB for 16 MB; dump's TestRememberStateBomb prints them): the
// nesting limit must count states, not saved rules, so the program fails
// at the limit with an error.
func TestRememberStateBomb(t *testing.T) {
	if memtest.InChild(t) {
		s := rememberBomb(4 << 20)
		tab := s.table(0)
		if _, err := rowsOf(tab); err == nil || !strings.Contains(err.Error(), "nested too deep") {
			t.Errorf("rows: %v, want the nesting error", err)
		}
		if _, err := lookup(tab, 0x1000); err == nil {
			t.Errorf("lookup succeeded")
		}
		return
	}
	memtest.AtMost(t, 200<<20, "for a 4 MiB program")
}

// TestManyRegistersBomb names 128 Ki registers, in descending order, and
// then advances 100,000 times (a 0.8 MB section): each rule insertion
// shifted every rule before it and each row copied them all, 40 s for one
// lookup. A row holds at most maxRules rules; beyond, the program fails.
func TestManyRegistersBomb(t *testing.T) {
	var instr []byte
	for r := 1 << 17; r > 0; r-- {
		instr = append(instr, byte(OpOffsetExtended))
		instr = append(instr, uleb(uint64(r))...)
		instr = append(instr, 1)
	}
	instr = append(instr, bytes.Repeat(adv(1), 100000)...)
	s := newSection(EHFrame)
	cie := s.CIE(1, "", nil, 1, -8, 16, stdCIE)
	s.AbsFDE(cie, 0x1000, 0x100000, false, instr)
	tab := s.table(0)
	if _, err := lookup(tab, 0x1000); err == nil || !strings.Contains(err.Error(), "too many register rules") {
		t.Errorf("lookup: %v, want too many register rules", err)
	}
	if _, err := rowsOf(tab); err == nil || !strings.Contains(err.Error(), "too many register rules") {
		t.Errorf("rows: %v, want too many register rules", err)
	}
	// Up to the limit, rules are kept.
	instr = nil
	for r := maxRules; r > 0; r-- {
		instr = append(instr, byte(OpOffsetExtended))
		instr = append(instr, uleb(uint64(1000+r))...)
		instr = append(instr, 1)
	}
	s = newSection(EHFrame)
	cie = s.CIE(1, "", nil, 1, -8, 16, cat([]byte{byte(OpDefCFA)}, uleb(7), uleb(8)))
	s.AbsFDE(cie, 0x1000, 0x10, false, instr)
	if r, err := lookup(s.table(0), 0x1000); err != nil || r.NumRules() != maxRules || r.RuleAt(0).Column != 1001 {
		t.Errorf("%d rules: %d rules, %v", maxRules, r.NumRules(), err)
	}
}

// TestRememberDepthLimit checks the limit itself: maxRememberDepth states
// nest, one more fails.
func TestRememberDepthLimit(t *testing.T) {
	for _, n := range []int{maxRememberDepth, maxRememberDepth + 1} {
		s := newSection(EHFrame)
		cie := s.CIE(1, "", nil, 1, -8, 16, cat([]byte{byte(OpDefCFA)}, uleb(7), uleb(8)))
		instr := bytes.Repeat([]byte{byte(OpRememberState)}, n)
		instr = append(instr, byte(OpDefCFAOffset), 32)
		instr = append(instr, adv(1)...)
		instr = append(instr, bytes.Repeat([]byte{byte(OpRestoreState)}, n)...)
		s.AbsFDE(cie, 0x1000, 0x10, false, instr)
		got, err := rowsOf(s.table(0))
		if n <= maxRememberDepth {
			if want := []string{"[1000,1001) cfa=r7+32", "[1001,1010) cfa=r7+8"}; err != nil || !slices.Equal(got, want) {
				t.Errorf("depth %d: %q, %v; want %q", n, got, err, want)
			}
		} else if err == nil || !strings.Contains(err.Error(), "nested too deep") {
			t.Errorf("depth %d: %v, want the nesting error", n, err)
		}
	}
}
