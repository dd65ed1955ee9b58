package symbolize

import (
	"debug/elf"
	"os"
	"testing"
)

// TestNameReaderBudget checks the bound on the names a lazy pass reads:
// reading one name again and again (as ties among aliases with long,
// overlapping names would) stops with errLazy once the bytes read pass
// the budget, which sends the lookup to reading the table whole.
func TestNameReaderBudget(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Skipf("%s: %v", exe, err)
	}
	defer f.Close()
	_, str, err := strtabOf(f, elf.SHT_DYNSYM)
	if err != nil || str == nil {
		t.Skipf("%s: no dynamic string table", exe)
	}
	data, err := str.Data()
	if err != nil {
		t.Fatal(err)
	}
	off, n := -1, 0 // the longest name
	for i := 1; i < len(data); {
		j := i
		for j < len(data) && data[j] != 0 {
			j++
		}
		if j-i > n {
			off, n = i, j-i
		}
		i = j + 1
	}
	if off < 0 {
		t.Skip("no names")
	}
	const budget = 4096
	nr := &nameReader{str: str, buf: make([]byte, nameChunk), left: budget}
	reads := 0
	for ; reads < 1000; reads++ {
		name, err := nr.read(uint32(off))
		if err != nil {
			break
		}
		if name != string(data[off:off+n]) {
			t.Fatalf("read %q at %d, want %q", name, off, data[off:off+n])
		}
	}
	if want := budget / (n + 1); reads != want {
		t.Errorf("%d reads of a %d-byte name within %d bytes, want %d", reads, n, budget, want)
	}
}
