package sysfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadFile reads what os.ReadFile reads: regular files around the
// buffer's first size, and files of /proc, which have no size.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	var names []string
	for _, n := range []int{0, 1, 4095, 4096, 4097, 8192, 100003} {
		name := filepath.Join(dir, "f"+string(rune('a'+len(names))))
		data := bytes.Repeat([]byte("0123456789abcdefghi\n"), n/20+1)[:n]
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	for _, p := range []string{"/proc/version", "/proc/self/cmdline"} {
		if _, err := os.Stat(p); err == nil {
			names = append(names, p)
		}
	}
	for _, name := range names {
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(name)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("ReadFile(%s) = %d bytes, %v; os.ReadFile gave %d bytes", name, len(got), err, len(want))
		}
		// ReadFileMax: a limit of the file's length reads it whole, one
		// byte less is an error.
		if got, err := ReadFileMax(name, max(len(want), 1)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("ReadFileMax(%s, %d) = %d bytes, %v", name, len(want), len(got), err)
		}
		if len(want) > 1 {
			if _, err := ReadFileMax(name, len(want)-1); !errors.Is(err, ErrTooLong) {
				t.Errorf("ReadFileMax(%s, %d) of %d bytes: %v, want ErrTooLong", name, len(want)-1, len(want), err)
			}
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v, want ErrNotExist", err)
	}
	var pe *os.PathError
	if _, err := Open(filepath.Join(dir, "missing")); !errors.As(err, &pe) || pe.Op != "open" {
		t.Errorf("Open of a missing file: %v, want an *os.PathError for open", err)
	}
}

// TestOpen reads a file at offsets and a directory's entries through
// the *os.File Open returns, as through os.Open's.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b", "a", "c"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("data of "+n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Open(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if n, err := f.ReadAt(buf, 5); err != nil || string(buf[:n]) != "of b" {
		t.Errorf("ReadAt = %q, %v", buf[:n], err)
	}
	if err := f.Close(); err != nil {
		t.Error(err)
	}
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("ReadDir = %v", got)
	}
}
