package sframe_test

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"log"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/sframe"
)

// The examples read testdata/drap-O2.elf, a small x86-64 executable that
// gcc and binutils 2.47 built with --gsframe (SFrame version 3).
const exe = "../testdata/drap-O2.elf"

// Parse an executable's .sframe section (with debug/elf) and check it
// before trusting it.
func ExampleParse() {
	f, err := elf.Open(exe)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".sframe")
	if sec == nil {
		log.Fatal("no .sframe section")
	}
	data, err := sec.Data()
	if err != nil {
		log.Fatal(err)
	}
	// The address makes function starts absolute. In a relocatable
	// object (.o) the section's relocations must be applied to data
	// first: package elffile does that.
	s, err := sframe.Parse(data, sec.Addr)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Header().Version, s.Header().ABI, s.Header().Flags)
	fmt.Println(s.NumFuncs(), "functions,", s.Header().NumFREs, "rows")
	// Output:
	// SFRAME_VERSION_3 SFRAME_ABI_AMD64_ENDIAN_LITTLE SFRAME_F_FDE_SORTED|SFRAME_F_FDE_FUNC_START_PCREL
	// 7 functions, 22 rows
}

// open returns the parsed .sframe section of an executable, as in the
// Parse example.
func open(path string) *sframe.Section {
	f, err := elf.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	data, err := f.Section(".sframe").Data()
	if err != nil {
		log.Fatal(err)
	}
	s, err := sframe.Parse(data, f.Section(".sframe").Addr)
	if err != nil {
		log.Fatal(err)
	}
	return s
}

// rule writes a rule the way one reads it: the value is base+offset, or
// is stored at [base+offset].
func rule(abi sframe.ABI, r sframe.Rule) string {
	base := fmt.Sprintf("r%d", r.Base) // a DWARF register number
	switch r.Base {
	case sframe.RegCFA:
		base = "CFA"
	case abi.Arch().SP():
		base = "SP"
	case abi.Arch().FP():
		base = "FP"
	}
	switch r.Kind {
	case sframe.RuleValue:
		return fmt.Sprintf("%s%+d", base, r.Offset)
	case sframe.RuleDeref:
		return fmt.Sprintf("[%s%+d]", base, r.Offset)
	}
	return r.Kind.String() // unspecified: unchanged from the callee
}

// Find how to recover the caller's frame at a PC: this is one step of a
// stack walk. With the callee's SP and FP, the caller's are CFA and the
// value saved at [CFA-16]; it returns to the address saved at [CFA-8].
func ExampleSection_RowForPC() {
	s := open(exe)
	for _, pc := range []uint64{0x1280, 0x1282, 0x11c6} {
		row, err := s.RowForPC(pc)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%#x: CFA = %s, RA = %s, FP = %s\n", pc,
			rule(s.Header().ABI, row.CFA), rule(s.Header().ABI, row.RA), rule(s.Header().ABI, row.FP))
	}
	// A PC that no function covers (here _init, which has no SFrame).
	_, err := s.RowForPC(0x1000)
	fmt.Println(errors.Is(err, sframe.ErrNoRow))
	// Output:
	// 0x1280: CFA = SP+8, RA = [CFA-8], FP = unspecified
	// 0x1282: CFA = SP+24, RA = [CFA-8], FP = [CFA-16]
	// 0x11c6: CFA = [FP-16], RA = [CFA-8], FP = [FP+0]
	// true
}

// FindFRE gives the function and row behind a lookup. PLT entries share
// one PC-mask function whose rows repeat every RepSize bytes.
func ExampleSection_FindFRE() {
	s := open(exe)
	f, fre, err := s.FindFRE(0x104b) // 11 bytes into the second PLT entry
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("function %d at %#x, %s, repeated every %d bytes\n", f.Index, f.Start, f.PCType(), f.RepSize)
	fmt.Printf("row at offset %#x, %d data words\n", fre.StartOff, fre.Count())
	// Output:
	// function 1 at 0x1030, SFRAME_FDE_PCTYPE_MASK, repeated every 16 bytes
	// row at offset 0xb, 1 data words
}

// Walk every function and its rows; nothing is allocated per row.
func ExampleSection_FREs() {
	s := open(exe)
	for i := range s.NumFuncs() {
		f, err := s.Func(i)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("[%#x, %#x) %s:", f.Start, f.End(), f.FDEType())
		it := s.FREs(&f)
		for it.Next() {
			row, err := s.Rules(&f, it.FRE())
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf(" %s", rule(s.Header().ABI, row.CFA))
		}
		if err := it.Err(); err != nil {
			log.Fatal(err)
		}
		fmt.Println()
	}
	// Output:
	// [0x1020, 0x1030) SFRAME_FDE_TYPE_DEFAULT: SP+16 SP+24
	// [0x1030, 0x1050) SFRAME_FDE_TYPE_DEFAULT: SP+8 SP+16
	// [0x1050, 0x1058) SFRAME_FDE_TYPE_DEFAULT: SP+16
	// [0x1060, 0x1083) SFRAME_FDE_TYPE_DEFAULT: SP+8 SP+16 SP+8
	// [0x1180, 0x118e) SFRAME_FDE_TYPE_DEFAULT: SP+8
	// [0x1190, 0x127f) SFRAME_FDE_TYPE_FLEX: SP+8 r10+0 r10+0 [FP-16] r10+0 SP+8
	// [0x1280, 0x12a0) SFRAME_FDE_TYPE_DEFAULT: SP+8 SP+16 SP+24 SP+32 SP+24 SP+16 SP+8
}

// Write a section for one function that pushes the frame pointer: the
// rows are given as the same Row values that Rules returns.
func ExampleEncode() {
	sp, fp := arch.AMD64RSP, arch.AMD64RBP
	ra := sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -8, Fixed: true}
	fn := sframe.EncFunc{Start: 0x401000, Size: 0x20, Rows: []sframe.EncRow{
		{StartOff: 0, Row: sframe.Row{ // on entry
			CFA: sframe.Rule{Kind: sframe.RuleValue, Base: sp, Offset: 8}, RA: ra}},
		{StartOff: 1, Row: sframe.Row{ // after push %rbp
			CFA: sframe.Rule{Kind: sframe.RuleValue, Base: sp, Offset: 16}, RA: ra,
			FP: sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -16}}},
		{StartOff: 4, Row: sframe.Row{ // after mov %rsp,%rbp
			CFA: sframe.Rule{Kind: sframe.RuleValue, Base: fp, Offset: 16}, RA: ra,
			FP: sframe.Rule{Kind: sframe.RuleDeref, Base: sframe.RegCFA, Offset: -16}}},
	}}
	// The zero options with an ABI write what binutils 2.47 writes:
	// version 3, sorted, PC-relative starts, the ABI's fixed RA offset.
	data, err := sframe.Encode(sframe.EncodeOptions{ABI: sframe.ABIAMD64LE, Addr: 0x400200}, []sframe.EncFunc{fn})
	if err != nil {
		log.Fatal(err)
	}
	s, err := sframe.Parse(data, 0x400200)
	if err != nil {
		log.Fatal(err)
	}
	row, err := s.RowForPC(0x401010)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(data), "bytes;", "at 0x401010 CFA =", rule(s.Header().ABI, row.CFA))
	// Output:
	// 60 bytes; at 0x401010 CFA = FP+16
}

// Extract is Encode's inverse: re-encoding what it returns gives the
// section gas or ld wrote, byte for byte, and changing the options
// converts it. Version 2 has no flexible FDEs, so this section, whose
// realigned function needs one, cannot be written as version 2.
func ExampleExtract() {
	s := open(exe)
	opts, funcs, err := sframe.Extract(s)
	if err != nil {
		log.Fatal(err)
	}
	data, err := sframe.Encode(opts, funcs)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("identical:", bytes.Equal(data, s.Data()))
	opts.Version = sframe.Version2
	_, err = sframe.Encode(opts, funcs)
	var e *sframe.EncodeError
	if errors.As(err, &e) {
		fmt.Printf("version 2: function at %#x: %s\n", e.Start, e.Msg)
	}
	// Output:
	// identical: true
	// version 2: function at 0x1190: flexible FDEs exist in version 3 only
}
