package dump

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
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
	WriteFileHeader(&b, filepath.Base(path), in.Format)
	if err := WriteSFrameText(&b, in); err != nil {
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
		if s.Header().Flags&sframe.FlagFDESorted == 0 {
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
// rows as the objdump text, with the functions' addresses as objdump
// prints them ("pc = 0x1020"), written as "0x..." strings; and that a
// reader that holds numbers as doubles (jq, JavaScript) finds no number
// above 2^53 (checkDoubles).
func TestCorpusJSON(t *testing.T) {
	for _, path := range corpus.ELFs(t) {
		in, err := LoadELF(path, "")
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteSFrameJSON(&b, in); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var j JSONFile
		if err := json.Unmarshal(b.Bytes(), &j); err != nil {
			t.Fatalf("%s: invalid JSON: %v", path, err)
		}
		checkDoubles(t, path, b.Bytes())
		text, _ := os.ReadFile(path + ".sframe.txt")
		var pcs []string
		rows := 0
		for _, line := range strings.Split(string(text), "\n") {
			switch {
			case strings.HasPrefix(line, "    func idx ["):
				pc, _, _ := strings.Cut(line[strings.Index(line, "pc = ")+5:], ",")
				pcs = append(pcs, pc)
			case len(line) > 20 && strings.HasPrefix(line, "    ") && isHex(line[4:20]):
				rows++
			}
		}
		jrows := 0
		for i, f := range j.Functions {
			jrows += len(f.Rows)
			if i < len(pcs) && fmt.Sprintf("%#x", uint64(f.Start)) != pcs[i] {
				t.Errorf("%s: function %d starts at %#x in JSON, %s in objdump's text", path, i, uint64(f.Start), pcs[i])
			}
		}
		if len(j.Functions) != len(pcs) || jrows != rows || int(j.Header.NumFREs) != rows {
			t.Errorf("%s: JSON has %d functions, %d rows; text has %d, %d", path, len(j.Functions), jrows, len(pcs), rows)
		}
	}
}

// TestJSONKernelAddresses checks that addresses above 2^53, as the
// kernel's, come out exactly as strings a reader of doubles keeps.
func TestJSONKernelAddresses(t *testing.T) {
	in, err := LoadELF("../testdata/drap-O2.elf", "")
	if err != nil {
		t.Fatal(err)
	}
	const base = 0xffffffff81000000
	data := in.SFrame.Data()
	k, err := FromRaw(data, "kernel", base, "")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteSFrameJSON(&b, k); err != nil {
		t.Fatal(err)
	}
	checkDoubles(t, "kernel", b.Bytes())
	f, _ := k.SFrame.Func(0)
	want := fmt.Sprintf(`"address":"0x%x"`, uint64(base))
	wantStart := fmt.Sprintf(`"functions":[{"index":0,"start":"0x%x",`, f.Start)
	if f.Start < 1<<53 || !strings.Contains(b.String(), want) || !strings.Contains(b.String(), wantStart) {
		t.Errorf("want %s and %s in:\n%.400s", want, wantStart, b.String())
	}
}

// checkDoubles decodes JSON as jq and JavaScript do, numbers as float64,
// and fails on any number a double does not hold exactly.
func checkDoubles(t *testing.T, name string, b []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case float64:
			if v > 1<<53 || v < -(1<<53) {
				t.Errorf("%s: number %v is past 2^53", name, v)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
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
	WriteSFrameText(&buf, in)
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := WriteSFrameText(&buf, in); err != nil {
			b.Fatal(err)
		}
	}
}

// sharedRows builds a v2 AMD64 section whose n functions all claim the
// same k rows, which the header counts once.
func sharedRows(n, k int) []byte {
	le := binary.LittleEndian
	b := make([]byte, sframe.HeaderSize, sframe.HeaderSize+20*n+4*k)
	le.PutUint16(b, sframe.Magic)
	b[2], b[3], b[4], b[6] = byte(sframe.Version2), byte(sframe.FlagFDESorted), byte(sframe.ABIAMD64LE), 0xf8
	le.PutUint32(b[8:], uint32(n))
	le.PutUint32(b[12:], uint32(k))
	le.PutUint32(b[16:], uint32(4*k))
	le.PutUint32(b[24:], uint32(20*n))
	for i := range n {
		var fde [20]byte
		le.PutUint32(fde[0:], uint32(i)<<16) // start
		le.PutUint32(fde[4:], 1<<16)         // size
		le.PutUint32(fde[12:], uint32(k))    // FREs, all at offset 0
		fde[16] = byte(sframe.FREAddr2)
		b = append(b, fde[:]...)
	}
	for i := range k {
		b = le.AppendUint16(b, uint16(i))
		b = append(b, 3, 8) // SP-based CFA, one 1-byte word: sp+8
	}
	return b
}

// TestSharedRowsBounded checks that both dump forms stop at the header's
// row count instead of printing every function's claim to the same rows
// (here 1000 rows printed a thousand times).
func TestSharedRowsBounded(t *testing.T) {
	const n, k = 1000, 1000
	s, err := sframe.Parse(sharedRows(n, k), 0)
	if err != nil {
		t.Fatal(err)
	}
	var e *sframe.Error
	var b bytes.Buffer
	err = WriteSFrameText(&b, &Input{Section: ".sframe", SFrame: s})
	if !errors.As(err, &e) || e.Kind != sframe.ErrCountMismatch || e.Func != 1 {
		t.Errorf("Text: %v, want a count mismatch in function 1", err)
	}
	if rows := strings.Count(b.String(), "  sp+8 "); rows != k {
		t.Errorf("Text printed %d rows, want the header's %d", rows, k)
	}
	j, err := SFrameJSON(&Input{Path: "shared", Format: "raw", Section: ".sframe", SFrame: s})
	if !errors.As(err, &e) || e.Kind != sframe.ErrCountMismatch || e.Func != 1 {
		t.Errorf("Build: %v, want a count mismatch in function 1", err)
	}
	if len(j.Functions) != 1 || len(j.Functions[0].Rows) != k {
		t.Errorf("Build kept %d functions, want the first with its %d rows", len(j.Functions), k)
	}
}
