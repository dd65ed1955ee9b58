package symbolize

import "github.com/ianlancetaylor/demangle"

// Demangle returns the source-level form of a C++ (Itanium ABI) or Rust
// symbol name, as c++filt and gdb print it, or name itself when it is not
// a mangled name, does not demangle, or would demangle to more than 64 KB.
func Demangle(name string) string {
	if len(name) < 2 || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R') {
		return name // the common case, C names, without the library's checks
	}
	// Symbol tables come from the programs being looked at: bound what a
	// crafted name can expand to (substitutions multiply its length); the
	// library stops at the bound, and a cut name is worse than the symbol.
	const maxPow = 16
	if d := demangle.Filter(name, demangle.Verbose, demangle.MaxLength(maxPow)); len(d) < 1<<maxPow {
		return d
	}
	return name
}
