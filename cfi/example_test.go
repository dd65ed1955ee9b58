package cfi_test

import (
	"debug/elf"
	"fmt"
	"log"

	"github.com/sframekit/sframekit/cfi"
)

// Find how to unwind from two addresses of an executable: parse its
// .eh_frame and look up the row of the CFI table at each address, as an
// unwinder does. The rows are those `readelf --debug-dump=frames-interp`
// prints for the functions realigned_caller (CFA rsp+32, rbx, rbp and the
// return address saved below it) and realigned (a stack realigned by
// GCC's DRAP: the CFA and the saved registers are DWARF expressions,
// which EvalExpression computes). Column 16, rip, is the return address.
func Example() {
	f, err := elf.Open("../testdata/drap-O2.elf")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	tab, err := cfi.FromELF(f, ".eh_frame") // an immutable Table, shareable by goroutines
	if err != nil {
		log.Fatal(err)
	}
	name := tab.Arch().RegName // "rsp" for DWARF register 7 on x86-64
	var ctx cfi.UnwindContext  // the lookups' scratch: one per goroutine
	var row cfi.Row            // reused by every lookup
	for _, pc := range []uint64{0x1290, 0x11d0} {
		fde, err := tab.RowForPC(&ctx, pc, &row)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%#x: function [%#x, %#x), row [%#x, %#x)\n", pc, fde.PCBegin, fde.PCEnd, row.Start, row.End)
		switch row.CFA.Kind {
		case cfi.CFARegOffset:
			fmt.Printf("  CFA = %s%+d\n", name(row.CFA.Reg), row.CFA.Offset)
		case cfi.CFAExpression:
			fmt.Printf("  CFA = %s\n", cfi.ExprString(row.CFA.Expr, tab.Arch()))
		}
		for _, r := range row.Rules() {
			switch r.Kind {
			case cfi.RuleOffset:
				fmt.Printf("  %s saved at CFA%+d\n", name(r.Column), r.Offset)
			case cfi.RuleExpression:
				fmt.Printf("  %s saved at %s\n", name(r.Column), cfi.ExprString(r.Expr, tab.Arch()))
			default:
				fmt.Printf("  %s: %v\n", name(r.Column), r.Kind)
			}
		}
	}
	// Output:
	// 0x1290: function [0x1280, 0x12a0), row [0x1288, 0x129b)
	//   CFA = rsp+32
	//   rbx saved at CFA-24
	//   rbp saved at CFA-16
	//   rip saved at CFA-8
	// 0x11d0: function [0x1190, 0x127f), row [0x11ce, 0x1275)
	//   CFA = DW_OP_breg6 (rbp): -16; DW_OP_deref
	//   rbx saved at DW_OP_breg6 (rbp): -24
	//   rbp saved at DW_OP_breg6 (rbp): 0
	//   r12 saved at DW_OP_breg6 (rbp): -8
	//   rip saved at CFA-8
}
