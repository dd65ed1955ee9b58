package elffile

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// sample is an executable shipped in the repository.
const sample = "../testdata/drap-O2.elf"

// TestOpenErrors checks the errors a user can act on, for the cases that
// give debug/elf's "EOF" or "bad magic number '[35 32 115 102]'": empty,
// short and cut-off files, text, and a file whose section contents
// extend past its end although its header tables fit.
func TestOpenErrors(t *testing.T) {
	whole, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	size := uint64(len(whole))
	// No section headers (as in a core file) and cut in the middle of
	// the last loaded segment: only the segment's extent shows the cut.
	noShdrs := bytes.Clone(whole)
	binary.LittleEndian.PutUint64(noShdrs[40:], 0) // e_shoff
	binary.LittleEndian.PutUint16(noShdrs[60:], 0) // e_shnum
	binary.LittleEndian.PutUint16(noShdrs[62:], 0) // e_shstrndx
	f, _ := elf.NewFile(bytes.NewReader(whole))
	var segEnd uint64
	for _, p := range f.Progs {
		segEnd = max(segEnd, p.Off+p.Filesz)
	}
	for _, c := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrNotELF},
		{"magic prefix", whole[:3], ErrNotELF},
		{"text", []byte("# sframekit\n"), ErrNotELF},
		{"magic only", whole[:4], &TruncatedError{4, 64}},
		{"half header", whole[:40], &TruncatedError{40, 64}},
		{"header", whole[:64], &TruncatedError{64, size}},
		{"half", whole[:size/2], &TruncatedError{int64(size / 2), size}},
		{"last byte missing", whole[:size-1], &TruncatedError{int64(size - 1), size}},
		{"segment cut", noShdrs[:segEnd-1], &TruncatedError{int64(segEnd - 1), segEnd}},
		{"whole", whole, nil},
		{"whole without section headers", noShdrs, nil},
	} {
		path := filepath.Join(t.TempDir(), "f")
		os.WriteFile(path, c.data, 0o644)
		ef, err := Open(path)
		if err == nil {
			ef.Close()
		}
		_, err2 := NewFile(c.data)
		for _, err := range []error{err, err2} {
			var te *TruncatedError
			switch want := c.want.(type) {
			case nil:
				if err != nil {
					t.Errorf("%s: %v", c.name, err)
				}
			case *TruncatedError:
				if !errors.As(err, &te) || *te != *want {
					t.Errorf("%s: error %v, want %v", c.name, err, want)
				}
			default:
				if !errors.Is(err, want) {
					t.Errorf("%s: error %v, want %v", c.name, err, want)
				}
			}
		}
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// FuzzNewFile checks NewFile's header checks on arbitrary bytes: no
// panic, and an error only where debug/elf fails or the file is cut
// short of what its headers describe (a truncation of unknown size only
// where debug/elf read past the end).
func FuzzNewFile(f *testing.F) {
	whole, err := os.ReadFile(sample)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(whole)
	f.Add(whole[:64])
	f.Add([]byte("\x7fELF\x01\x02\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := NewFile(data)
		_, elfErr := elf.NewFile(bytes.NewReader(data))
		var te *TruncatedError
		switch {
		case err == nil && elfErr != nil:
			t.Fatalf("NewFile accepts what debug/elf rejects: %v", elfErr)
		case errors.As(err, &te) && te.Want == 0 && (te.Size != int64(len(data)) || elfErr == nil):
			// Want unknown: only debug/elf's own read past the end.
			t.Fatalf("%v for %d bytes, debug/elf: %v", err, len(data), elfErr)
		case errors.As(err, &te) && te.Want != 0 && (te.Size != int64(len(data)) || te.Want <= uint64(len(data))):
			t.Fatalf("%v for %d bytes", err, len(data))
		case errors.Is(err, ErrNotELF) && len(data) >= 4 && string(data[:4]) == elf.ELFMAG:
			t.Fatalf("ELF magic present, yet %v", err)
		}
	})
}

// TestReadStreamLimit checks that a stream longer than the limit is
// refused, not read on.
func TestReadStreamLimit(t *testing.T) {
	defer func(n int64) { maxStream = n }(maxStream)
	maxStream = 100
	if b, err := ReadStream(bytes.NewReader(make([]byte, 100))); err != nil || len(b) != 100 {
		t.Errorf("100 bytes: %d, %v", len(b), err)
	}
	r := &countingZeros{}
	if _, err := ReadStream(r); err == nil || r.n > 4096 {
		t.Errorf("endless stream: error %v after reading %d bytes", err, r.n)
	}
}

// countingZeros is an endless stream of zeros that counts what is read.
type countingZeros struct{ n int }

func (z *countingZeros) Read(b []byte) (int, error) {
	clear(b)
	z.n += len(b)
	return len(b), nil
}
