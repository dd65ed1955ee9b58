package symbolize

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ianlancetaylor/demangle"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestDemangleMatchesCxxfilt demangles every C++ symbol of the installed
// libstdc++ and compares with binutils' c++filt.
func TestDemangleMatchesCxxfilt(t *testing.T) {
	testprog.NeedTool(t, "c++filt")
	var lib string
	for _, p := range []string{"/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/lib64/libstdc++.so.6"} {
		if _, err := os.Stat(p); err == nil {
			lib = p
			break
		}
	}
	if lib == "" {
		t.Skip("no libstdc++.so.6 found")
	}
	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.DynamicSymbols()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range syms {
		if strings.HasPrefix(s.Name, "_Z") {
			names = append(names, s.Name)
		}
	}
	names = append(names, "main", "pause", "_start", "__libc_start_main")
	cmd := exec.Command("c++filt")
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(string(bytes.TrimRight(out, "\n")), "\n"), "\n")
	if len(want) != len(names) {
		t.Fatalf("c++filt printed %d lines for %d names", len(want), len(names))
	}
	bad := 0
	for i, n := range names {
		if got := Demangle(n); got != want[i] {
			bad++
			if bad <= 10 {
				t.Errorf("%s:\n got  %s\n want %s", n, got, want[i])
			}
		}
	}
	t.Logf("%d names from %s, %d differ", len(names), lib, bad)
}

// TestDemangleBounded: a name that expands far beyond its size (each of
// 8,000 parameters is a two-byte substitution for a 30-character class
// name) comes back as it is rather than as a quarter megabyte of text.
func TestDemangleBounded(t *testing.T) {
	const class = "AVeryLongClassNameForTheTestXY" // 30 bytes
	name := "_Z1f30" + class + strings.Repeat("S_", 8000)
	if full := demangle.Filter(name, demangle.Verbose); len(full) < 200_000 {
		t.Fatalf("the test name expands to only %d bytes", len(full))
	}
	if got := Demangle(name); got != name {
		t.Errorf("demangled to %d bytes", len(got))
	}
	if got := Demangle("_Z4deepi"); got != "deep(int)" {
		t.Errorf("Demangle(_Z4deepi) = %q", got)
	}
}
