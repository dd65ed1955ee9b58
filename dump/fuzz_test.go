package dump

import (
	"bytes"
	"io"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframe"
)

// FuzzDecode feeds arbitrary bytes through everything that reads an
// SFrame section: Parse, Validate, function and FRE iteration, rules,
// lookups and both dump forms. None may panic, and a section that
// validates must dump without error.
func FuzzDecode(f *testing.F) {
	for _, path := range corpus.List() {
		in, err := LoadELF(path, "")
		if err != nil || len(in.SFrame.Data()) > 64<<10 {
			continue
		}
		f.Add(in.SFrame.Data(), in.SFrame.Addr())
	}
	// A minimal v3 AMD64 section, for runs without the corpus.
	f.Add([]byte{0xe2, 0xde, 3, 5, 3, 0, 0xf8, 0, 1, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0,
		0xe4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 4, 0, 0, 0, 0, 0, 0, 0,
		1, 0, 0, 0, 0, 0, 3, 8}, uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, addr uint64) {
		s, err := sframe.Parse(data, addr)
		if err != nil {
			return
		}
		verr := s.Validate()
		for i := 0; i < s.NumFuncs(); i++ {
			fn, err := s.Func(i)
			if err != nil {
				continue
			}
			it := s.FREs(&fn)
			for it.Next() {
				e := it.FRE()
				s.Rules(&fn, e)
				s.RowForPC(fn.Start + uint64(e.StartOff))
			}
			s.RowForPC(fn.Start + uint64(fn.Size) - 1)
		}
		s.RowForPC(addr)
		in := &Input{Path: "fuzz", Format: "raw", Section: ".sframe", SFrame: s}
		terr := WriteSFrameText(io.Discard, in)
		jerr := WriteSFrameJSON(io.Discard, in)
		if verr == nil && (terr != nil || jerr != nil) {
			t.Fatalf("valid section fails to dump: text %v, json %v", terr, jerr)
		}
		if verr == nil {
			// A valid section dumps the same way twice (no hidden state).
			var a, b bytes.Buffer
			WriteSFrameText(&a, in)
			WriteSFrameText(&b, in)
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatal("dump is not deterministic")
			}
		}
	})
}
