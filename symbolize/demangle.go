package symbolize

import "github.com/ianlancetaylor/demangle"

// Demangle returns the source-level form of a C++ (Itanium ABI) or Rust
// symbol name, as c++filt and gdb print it, or name itself when it is not
// a mangled name or does not demangle.
func Demangle(name string) string {
	if len(name) < 2 || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R') {
		return name // the common case, C names, without the library's checks
	}
	return demangle.Filter(name, demangle.Verbose)
}
