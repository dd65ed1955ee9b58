package sframe_test

import (
	"bytes"
	"debug/elf"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframe"
)

// encCorpusSection reads the raw (unrelocated) SFrame section of an ELF
// file and its address.
func encCorpusSection(t testing.TB, path string) ([]byte, uint64) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := elffile.FindSFrame(f, "")
	if sec == nil {
		t.Fatalf("%s: no SFrame section", path)
	}
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	return data, sec.Addr
}

func encCorpusVersion(path string) string { return filepath.Base(filepath.Dir(path)) }

// TestReencodeCorpus decodes every v2 and v3 section of the corpus (as
// gas and ld wrote them; relocatable objects unrelocated) and encodes the
// result again: the bytes must be identical.
func TestReencodeCorpus(t *testing.T) {
	n := 0
	for _, path := range corpus.ELFs(t) {
		if v := encCorpusVersion(path); v != "v2" && v != "v3" {
			continue
		}
		data, addr := encCorpusSection(t, path)
		s, err := sframe.Parse(data, addr)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		opts, funcs, err := sframe.Extract(s)
		if err != nil {
			t.Errorf("%s: extract: %v", path, err)
			continue
		}
		out, err := sframe.Encode(opts, funcs)
		if err != nil {
			t.Errorf("%s: encode: %v", path, err)
			continue
		}
		if !bytes.Equal(out, data) {
			t.Errorf("%s: re-encoded section differs: %s", path, encFirstDiff(out, data))
			continue
		}
		n++
	}
	t.Logf("%d sections re-encoded byte for byte", n)
}

func encFirstDiff(got, want []byte) string {
	for i := 0; i < len(got) && i < len(want); i++ {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %#x: got %#02x, want %#02x (lengths %d, %d)", i, got[i], want[i], len(got), len(want))
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(got), len(want))
}
