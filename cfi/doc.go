// Package cfi reads DWARF call frame information: the .eh_frame,
// .debug_frame and .eh_frame_hdr sections that tell an unwinder, for any
// instruction address, how to find the caller's frame (the CFA) and where
// each register of the caller was saved.
//
// The package is built for three kinds of users: unwinders (FromELF or
// New, then RowForPC plus EvalExpression; see the example), converters
// that turn CFI into other formats such as SFrame (walk Entries and each
// FDE's rows with NewUnwindTable), and tools that print or check CFI and
// read it their own way, as readelf does (EntryHeaderAt and DecodeCIE for
// entries as encoded, Instructions for any program, and an Interpreter
// that decodes and executes one instruction at a time, the caller
// choosing what takes effect). Package dump prints CFI as readelf -wF
// does with these. It follows the design of debug/dwarf and gimli:
//
//   - a Table is a zero-copy view over the section bytes; CIEs, FDEs,
//     instruction programs and expressions are sub-slices of them;
//   - a Table does not change once made and may be shared by goroutines;
//     the scratch state of a lookup is an UnwindContext the caller owns
//     (gimli's UnwindContext), so RowForPC does not allocate;
//   - call frame instructions and DWARF expressions are decoded in one
//     place each, InstructionIter and OperationIter, which the
//     interpreter, the evaluator and the printers all read through: the
//     decoder reads what it can (an unknown opcode, a register number
//     beyond 32 bits), the interpreter rejects what it cannot execute;
//   - errors are *Error values that name the section and byte offset, and
//     a malformed entry only affects itself;
//   - rows are produced as a stream, in one pass over each program;
//   - lookups use the .eh_frame_hdr binary-search table when present, a
//     sorted index otherwise, and cache CIEs with their initial rules.
//
// No input makes the package panic or loop without end, and what one
// costs is bounded by its size: DW_CFA_remember_state nests at most 64 Ki
// deep, a row holds at most 256 register rules, and rows are computed one
// at a time, never held for a whole table.
package cfi
