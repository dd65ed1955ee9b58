package dump

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframe"
)

// render produces what `sframe dump NAME` prints when run in the file's
// directory, as the reference dumps were made.
func render(t testing.TB, path string) []byte {
	in, err := LoadELF(path, "")
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var b bytes.Buffer
	FileHeader(&b, filepath.Base(path), in.Format)
	if err := Text(&b, in.SFrame, in.Section); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b.Bytes()
}

func TestCorpusObjdumpIdentical(t *testing.T) {
	files := corpus.ELFs(t)
	for _, path := range files {
		want, err := os.ReadFile(path + ".sframe.txt")
		if err != nil {
			t.Fatal(err)
		}
		got := render(t, path)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: dump differs from objdump --sframe:\n%s", path, corpus.FirstDiff(string(got), string(want)))
		}
	}
	t.Logf("%d files compared", len(files))
}

// TestCorpusValidates checks that every corpus section passes Validate,
// and that looking up the first PC of each row finds that row.
func TestCorpusValidates(t *testing.T) {
	for _, path := range corpus.ELFs(t) {
		in, err := LoadELF(path, "")
		if err != nil {
			t.Fatal(err)
		}
		s := in.SFrame
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if s.Flags&sframe.FlagFDESorted == 0 {
			continue // relocatable objects: functions of different text sections overlap
		}
		for i := 0; i < s.NumFuncs(); i++ {
			f, _ := s.Func(i)
			it := s.FREs(&f)
			for it.Next() {
				e := it.FRE()
				pc := f.Start + uint64(e.StartOff)
				_, got, err := s.FindFRE(pc)
				if err != nil || got.Off != e.Off {
					t.Errorf("%s: func %d: lookup of %#x found FRE at %#x (%v), want %#x", path, i, pc, got.Off, err, e.Off)
				}
			}
		}
	}
}

// TestCorpusJSON checks that the JSON form holds the same functions and
// rows as the objdump text.
func TestCorpusJSON(t *testing.T) {
	for _, path := range corpus.ELFs(t) {
		in, err := LoadELF(path, "")
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := JSON(&b, in); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var j JSONFile
		if err := json.Unmarshal(b.Bytes(), &j); err != nil {
			t.Fatalf("%s: invalid JSON: %v", path, err)
		}
		text, _ := os.ReadFile(path + ".sframe.txt")
		funcs, rows := 0, 0
		for _, line := range strings.Split(string(text), "\n") {
			switch {
			case strings.HasPrefix(line, "    func idx ["):
				funcs++
			case len(line) > 20 && strings.HasPrefix(line, "    ") && isHex(line[4:20]):
				rows++
			}
		}
		jrows := 0
		for _, f := range j.Functions {
			jrows += len(f.Rows)
		}
		if len(j.Functions) != funcs || jrows != rows || int(j.Header.NumFREs) != rows {
			t.Errorf("%s: JSON has %d functions, %d rows; text has %d, %d", path, len(j.Functions), jrows, funcs, rows)
		}
	}
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// BenchmarkText formats the largest corpus section as objdump text (the
// work of `sframe dump` after reading the file).
func BenchmarkText(b *testing.B) {
	in, err := LoadELF(filepath.Join(corpus.Dir(b), "x86_64", "v3", "big-pic.so"), "")
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	Text(&buf, in.SFrame, in.Section)
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := Text(&buf, in.SFrame, in.Section); err != nil {
			b.Fatal(err)
		}
	}
}
