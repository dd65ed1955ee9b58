package sframegen

import (
	"debug/elf"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/sframe"
)

// sizeVsGas returns the size of the section the converter makes for the
// functions gas/ld described, and the size of their section.
func sizeVsGas(tb testing.TB, p string, v sframe.Version) (ours, theirs int) {
	f, err := elf.Open(p)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sec := elffile.FindSFrame(f, "")
	r, err := FromCFI(f, Options{Version: v})
	if err != nil {
		tb.Fatal(err)
	}
	starts := map[uint64]bool{}
	for _, g := range gasFuncs(tb.(*testing.T), f) {
		starts[g.Start] = true
	}
	var same []sframe.EncFunc
	for _, fn := range r.Funcs {
		if starts[fn.Start] {
			same = append(same, fn)
		}
	}
	opts := r.EncodeOptions(sec.Addr)
	out, err := sframe.Encode(opts, same)
	if err != nil {
		tb.Fatal(err)
	}
	return len(out), int(sec.Size)
}

// TestSizeVsGas checks that, for the functions gas and ld described, the
// generated section is within 1% of theirs for every corpus executable
// and shared library.
func TestSizeVsGas(t *testing.T) {
	paths, versions := corpusFiles(t)
	for i, p := range paths {
		if filepath.Ext(p) == ".o" {
			continue // objects: gas pads and relocates differently; sizes are compared on linked files
		}
		ours, theirs := sizeVsGas(t, p, versions[i])
		if d := ours - theirs; d*100 > theirs || -d*100 > theirs {
			t.Errorf("%s: %d bytes, gas/ld %d", p, ours, theirs)
		}
		if testing.Verbose() && filepath.Base(p) == "big-pic.so" {
			t.Logf("%s: %d bytes, gas/ld %d", p, ours, theirs)
		}
	}
}
