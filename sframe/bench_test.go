package sframe

import (
	"debug/elf"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
)

// loadCorpusSection returns the .sframe bytes and address of a linked
// corpus file (no relocations to apply; package elffile, which would
// apply them, imports this one).
func loadCorpusSection(tb testing.TB, rel string) ([]byte, uint64) {
	tb.Helper()
	path := filepath.Join(corpus.Dir(tb), rel)
	f, err := elf.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".sframe")
	data, err := sec.Data()
	if err != nil {
		tb.Fatal(err)
	}
	return data, sec.Addr
}

// largestCorpusSection is the biggest .sframe of the corpus (3,000
// generated functions).
const largestCorpusSection = "x86_64/v3/big-pic.so"

func BenchmarkDecodeValidate(b *testing.B) {
	data, addr := loadCorpusSection(b, largestCorpusSection)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		s, err := Parse(data, addr)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// bigSection synthesizes a sorted v3 section of n functions by repeating
// the functions (and rows) of a corpus section, laid out back to back.
func bigSection(tb testing.TB, n int) (*Section, []uint64) {
	data, addr := loadCorpusSection(tb, largestCorpusSection)
	src, err := Parse(data, addr)
	if err != nil {
		tb.Fatal(err)
	}
	var protos []testFunc
	for i := 0; i < src.NumFuncs(); i++ {
		f, _ := src.Func(i)
		tf := testFunc{size: f.Size, info: f.Info, info2: f.Info2, rep: f.RepSize}
		it := src.FREs(&f)
		for it.Next() {
			e := it.FRE()
			var words []int32
			for k := 0; k < e.Count(); k++ {
				w, _ := src.Word(e, k)
				words = append(words, w)
			}
			tf.fres = append(tf.fres, testFRE{e.StartOff, e.Info, words})
		}
		protos = append(protos, tf)
	}
	ts := &testSection{version: Version3, flags: FlagFDESorted | FlagFuncStartPCRel, abi: ABIAMD64LE, fixedRA: -8}
	starts := make([]uint64, n)
	pc := uint64(0x100000)
	for i := 0; i < n; i++ {
		tf := protos[i%len(protos)]
		starts[i] = pc
		// PC-relative: field holds function - field position.
		tf.start = int64(pc) - int64(HeaderSize+i*16)
		ts.funcs = append(ts.funcs, tf)
		pc += uint64(tf.size+15) &^ 15
	}
	s, err := Parse(ts.bytes(), 0)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		tb.Fatal(err)
	}
	return s, starts
}

const benchFuncs = 100_000

// randomPCs returns PCs inside random functions of the section.
func randomPCs(s *Section, starts []uint64, n int) []uint64 {
	r := rand.New(rand.NewPCG(1, 2))
	pcs := make([]uint64, n)
	for i := range pcs {
		k := r.IntN(len(starts))
		f, _ := s.Func(k)
		pcs[i] = starts[k] + uint64(r.IntN(int(f.Size)))
	}
	return pcs
}

func BenchmarkFindFRE(b *testing.B) {
	s, starts := bigSection(b, benchFuncs)
	pcs := randomPCs(s, starts, 1<<16)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.RowForPC(pcs[i&(len(pcs)-1)]); err != nil && err != ErrNoRow {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSearchBaseline is the floor for FindFRE: a plain sort.Search
// over the same function start addresses for the same PCs.
func BenchmarkSearchBaseline(b *testing.B) {
	s, starts := bigSection(b, benchFuncs)
	pcs := randomPCs(s, starts, 1<<16)
	b.ReportAllocs()
	i := 0
	sink := 0
	for b.Loop() {
		pc := pcs[i&(len(pcs)-1)]
		sink += sort.Search(len(starts), func(k int) bool { return starts[k] > pc })
		i++
	}
	if sink == 0 {
		b.Fatal("no results")
	}
}

// TestBigSectionLookups checks the benchmark's synthesized section: each
// random PC finds the function that contains it.
func TestBigSectionLookups(t *testing.T) {
	s, starts := bigSection(t, 20_000)
	for _, pc := range randomPCs(s, starts, 5000) {
		k := sort.Search(len(starts), func(k int) bool { return starts[k] > pc }) - 1
		if got := s.FindFunc(pc); got != k {
			t.Fatalf("FindFunc(%#x) = %d, want %d", pc, got, k)
		}
	}
}

// TestIndexedFuncsMatchTable checks that functions rebuilt from the lookup
// index equal those decoded from the table, for every corpus section of a
// linked file (sorted) and every version.
func TestIndexedFuncsMatchTable(t *testing.T) {
	n := 0
	for _, path := range corpus.ELFs(t) {
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sec := f.Section(".sframe")
		if f.Type == elf.ET_REL || sec == nil {
			f.Close()
			continue
		}
		data, _ := sec.Data()
		f.Close()
		s, err := Parse(data, sec.Addr)
		if err != nil {
			t.Fatal(err)
		}
		s.idxOnce.Do(s.buildIndex)
		if s.idx.recs == nil {
			t.Errorf("%s: no lookup index built", path)
			continue
		}
		for i := 0; i < s.NumFuncs(); i++ {
			want, _ := s.Func(i)
			var got Func
			s.funcAt(i, &got)
			if got != want {
				t.Errorf("%s: function %d: index gives %+v, table %+v", path, i, got, want)
			}
		}
		n++
	}
	if n == 0 {
		t.Fatal("no linked corpus files")
	}
}
