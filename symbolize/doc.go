// Package symbolize turns addresses inside ELF objects into what a stack
// trace shows: the function and offset (from .symtab, else .dynsym), the
// source file and line (DWARF line tables), and the calls the compiler
// inlined at the address (DWARF inlined subroutines), reading separate
// debug files found through the build ID or .gnu_debuglink. Demangle
// gives C++ and Rust names as c++filt prints them.
//
// A Symbolizer caches each object it reads, keyed by the path given (or
// the name given to Register, for images that exist only in memory, such
// as the vDSO). Lookup returns a Symbol, LookupFunc the same without
// reading line tables, Inlines the inlined calls, innermost first:
//
//	sym := symbolize.New()
//	defer sym.Close()
//	if s, ok := sym.Lookup("/usr/bin/prog", addr); ok {
//		fmt.Println(symbolize.Demangle(s.Name), s.Offset, s.File, s.Line)
//	}
//	for _, in := range sym.Inlines("/usr/bin/prog", addr) { ... }
//
// Addresses are in the object's own virtual address space, the space of
// symbol values: for a runtime address in a target, pass runtime -
// Module.Bias (arch.Module.ELFAddr). For the return address of a
// caller frame, look up address-1 so that a call at the end of a
// function is attributed to that function and to the line of the call.
//
// Symbols are kept sorted for binary search; the line index is built on
// the first line lookup in an object. A Lazy Symbolizer, for a few
// lookups per object (one stack trace), builds no index: LookupFuncs
// answers a batch of addresses in one pass over the symbol table. Lookups do not allocate once an
// object is loaded. A Symbolizer is safe for concurrent use. Object files
// are untrusted input: a file that cannot be read makes its lookups fail
// (Err says why), inlining is followed at most 64 levels deep, and
// Demangle leaves alone a name whose demangled form would pass 64 KB.
// Sections are read through elffile, so a compressed symbol table or
// DWARF section may expand to at most elffile.MaxDecompressed (256 MiB;
// the DWARF sections together too), and an object beyond that gets no
// symbols or lines, with Err saying why.
package symbolize
