package sframegen

import (
	"debug/elf"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframe"
)

// TestFromFDEs converts every third FDE of corpus files (and libc when
// present) with FromFDEs: each function must come out as FromCFITable
// converts it with all the others, and the rest not at all.
func TestFromFDEs(t *testing.T) {
	paths := []string{filepath.Join(corpus.Dir(t), "x86_64/v3/big-pic.so"), filepath.Join(corpus.Dir(t), "aarch64/v3/drap-O2.elf"), filepath.Join(corpus.Dir(t), "s390x/v3/basic-O2.elf"), libcPath}
	for _, p := range paths {
		f, err := elf.Open(p)
		if err != nil {
			if p == libcPath {
				continue
			}
			t.Fatal(err)
		}
		defer f.Close()
		abi, err := ABIFor(f)
		if err != nil {
			t.Fatal(err)
		}
		tab, err := cfi.FromELF(f, ".eh_frame")
		if err != nil {
			t.Fatal(err)
		}
		all, err := FromCFITable(tab, abi, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var some []cfi.FDE
		it := tab.Entries()
		for i := 0; it.Next(); {
			if e := it.Entry(); e.Kind == cfi.KindFDE && e.FDE != nil {
				if i%3 == 0 {
					some = append(some, *e.FDE)
				}
				i++
			}
		}
		want := map[uint64]bool{}
		for _, fde := range some {
			want[fde.Offset] = true
		}
		var wantFuncs []sframe.EncFunc
		for i, fn := range all.Funcs {
			if want[all.FDEOffsets[i]] {
				wantFuncs = append(wantFuncs, fn)
			}
		}
		r, err := FromFDEs(tab, abi, some, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(wantFuncs) == 0 || !reflect.DeepEqual(r.Funcs, wantFuncs) {
			t.Errorf("%s: FromFDEs gives %d functions, FromCFITable %d of those FDEs (or they differ)", p, len(r.Funcs), len(wantFuncs))
		}
		if r.Stats.CFIFuncs != len(some) {
			t.Errorf("%s: %d CFI functions counted, %d given", p, r.Stats.CFIFuncs, len(some))
		}
	}
}
