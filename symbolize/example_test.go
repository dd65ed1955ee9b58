package symbolize_test

import (
	"fmt"

	"github.com/sframekit/sframekit/symbolize"
)

// Name the function around addresses of testdata/drap-O2.elf, which has
// a symbol table but no DWARF: no file or line is known.
func ExampleSymbolizer_Lookup() {
	sym := symbolize.New()
	defer sym.Close()
	const exe = "../testdata/drap-O2.elf"
	for _, addr := range []uint64{0x1060, 0x11c6, 0x1281} {
		if s, ok := sym.Lookup(exe, addr); ok {
			fmt.Printf("%#x: %s (%s+%#x, line %d)\n", addr, s, s.Name, s.Offset, s.Line)
		}
	}
	if _, ok := sym.Lookup(exe, 0x10); !ok {
		fmt.Println("0x10: no function") // below the first symbol
	}
	// Output:
	// 0x1060: main (main+0x0, line 0)
	// 0x11c6: realigned+0x36 (realigned+0x36, line 0)
	// 0x1281: realigned_caller+0x1 (realigned_caller+0x1, line 0)
	// 0x10: no function
}

// The calls inlined at an address, innermost first, as gdb shows them as
// frames of their own. The object needs DWARF (its own or in a separate
// debug file); without it Inlines returns nil.
func ExampleSymbolizer_Inlines() {
	sym := symbolize.New()
	defer sym.Close()
	const exe, addr = "/usr/local/bin/prog", 0x401234
	for _, in := range sym.Inlines(exe, addr) {
		fmt.Printf("%s, inlined at %s:%d\n", in.Name, in.File, in.Line) // names come demangled
	}
	if s, ok := sym.Lookup(exe, addr); ok {
		fmt.Printf("%s at %s:%d\n", symbolize.Demangle(s.Name), s.File, s.Line)
	}
}

func ExampleDemangle() {
	fmt.Println(symbolize.Demangle("_ZNSt6vectorIiSaIiEE9push_backEOi"))
	fmt.Println(symbolize.Demangle("_ZN3foo3barEv"))
	fmt.Println(symbolize.Demangle("main")) // not mangled: unchanged
	// Output:
	// std::vector<int, std::allocator<int> >::push_back(int&&)
	// foo::bar()
	// main
}
