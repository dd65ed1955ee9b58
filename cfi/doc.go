// Package cfi reads DWARF call frame information: the .eh_frame,
// .debug_frame and .eh_frame_hdr sections that tell an unwinder, for any
// instruction address, how to find the caller's frame (the CFA) and where
// each register of the caller was saved.
//
// The package is built for three kinds of users: tools that print or
// verify CFI (see Dump for output identical to readelf -wF), converters
// that turn CFI into other formats such as SFrame (walk Entries and each
// FDE's rows with NewUnwindTable), and unwinders (RulesForPC plus
// EvalExpression). It follows the design of debug/dwarf and gimli:
//
//   - a Table is a zero-copy view over the section bytes; CIEs, FDEs,
//     instruction programs and expressions are sub-slices of them;
//   - errors are *Error values that name the section and byte offset, and
//     a malformed entry only affects itself;
//   - rows are produced as a stream, in one pass over each program;
//   - lookups use the .eh_frame_hdr binary-search table when present, a
//     sorted index otherwise, cache CIE initial rules and reuse scratch
//     state, so RulesForPC does not allocate.
//
// No input makes the package panic, loop without end or allocate more than
// a bounded multiple of the input size.
package cfi
