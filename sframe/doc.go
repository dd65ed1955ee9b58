// Package sframe reads, validates, queries and writes SFrame sections
// (.sframe, the stack-trace format that GNU as and ld emit with
// --gsframe): versions 1, 2 and 3, the AMD64, AArch64 and s390x ABIs,
// either byte order. An SFrame section says, for every PC of the code it
// covers, how to find the caller's frame: the canonical frame address
// (CFA), the return address (RA) and the frame pointer (FP).
//
// # Reading
//
// Parse makes a Section, a zero-copy view over the section bytes: it
// checks the header and that the function table and the row (FRE)
// sub-section lie inside the data, and decodes nothing else. Validate
// then checks everything the Linux kernel checks, and more, and reports
// the first problem as an *Error naming the function and byte offset.
// Accessors never read out of bounds, even on a section that was not
// validated: they return errors instead. A Section cannot be changed
// after Parse: Header returns a copy of the decoded header.
//
//	sec := elfFile.Section(".sframe")
//	data, err := sec.Data()
//	...
//	s, err := sframe.Parse(data, sec.Addr)
//	...
//	err = s.Validate()
//
// The section address given to Parse makes function starts absolute.
// The section of a relocatable object must have its relocations applied
// first (package elffile does).
//
// # Looking up a PC
//
// RowForPC returns the Row that covers a PC: one Rule each for the CFA,
// the RA and the FP, already interpreted (ABI word layouts, the header's
// fixed offsets, s390x scaling and register encodings, flexible FDEs),
// so that the dumper, the unwinder and the converter share one reading:
//
//	row, err := s.RowForPC(pc)
//	// row.CFA: Kind RuleValue, Base s.Header().ABI.Arch().SP(), Offset 16 -> CFA = SP+16
//	// row.RA:  Kind RuleDeref, Base RegCFA, Offset -8     -> RA = [CFA-8]
//
// FindFRE returns the raw function (Func) and row (FRE) instead, and
// FindFunc only the function's index. They search as libsframe and the
// kernel do: binary search when the section is flagged sorted, a linear
// scan otherwise. A miss returns ErrNoRow. Lookups do not allocate, except
// to report corrupt data; the first one on a sorted section builds a
// lookup index (about 20 bytes a function) that later ones share.
//
// # Iterating
//
// Func(i), for i below NumFuncs, decodes one function; FREs iterates over
// its rows and Rules interprets a row. Nothing is allocated per function
// or row. A Func knows its section's version: its accessors (FREType,
// PCType, FDEType, Signal) give the decoded attributes of any version.
//
//	for i := range s.NumFuncs() {
//		f, err := s.Func(i)
//		...
//		for it := s.FREs(&f); it.Next(); {
//			row, err := s.Rules(&f, it.FRE())
//			...
//		}
//	}
//
// # Writing
//
// Encode writes a version 2 or 3 section from functions (EncFunc) whose
// rows are the same Row values that Rules returns, laying them out as
// gas and ld do. Extract is its inverse: Encode(Extract(s)) gives back
// the bytes of any section gas or ld wrote, and changing the options
// converts a section to another version or layout.
//
// # Registers
//
// Rules name registers by DWARF number (arch.Reg, from package arch, the
// vocabulary all of sframekit shares): ABI.Arch gives the architecture,
// whose SP and FP are the stack and frame pointers rules are based on,
// and RegCFA stands for the CFA as a base. Only flexible FDEs (v3) and
// v2 s390x rows name other registers.
//
// # Untrusted input
//
// Parse, Validate, the lookups and Extract accept any bytes: they return
// errors, never panic, and size what they allocate by the section size,
// never by an unchecked count. Parse rejects a function or row count
// that the section cannot hold (every FRE takes at least two bytes), the
// lookup index holds one record per function, and Extract one EncRow per
// row of the header's count. Rules name registers up to MaxReg; a larger
// number in the data is reported by Validate. A Section is immutable
// after Parse and safe for concurrent use.
package sframe
