package sysfile

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenRegular opens regular files and refuses, without waiting, a
// FIFO with no writer (whose plain open would block for ever), a
// device, a directory and a socket, naming the path.
func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OpenRegular(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(b) != "contents" {
		t.Errorf("read %q, %v", b, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A socket cannot be opened at all (ENXIO).
	if f, err := OpenRegular(sock); err == nil {
		f.Close()
		t.Errorf("OpenRegular(%s) opened a socket", sock)
	}
	for _, p := range []string{fifo, link, "/dev/null", dir} {
		f, err := OpenRegular(p)
		var pe *os.PathError
		if !errors.Is(err, ErrNotRegular) || !errors.As(err, &pe) || pe.Path != p {
			t.Errorf("OpenRegular(%s) = %v, want a path error for %s wrapping ErrNotRegular", p, err, p)
		}
		if f != nil {
			f.Close()
		}
	}
	if _, err := OpenRegular(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestOpenRegularNoFollow refuses a symbolic link as the last component,
// even to a regular file, and still refuses a FIFO; a link in a
// directory component is followed, and a regular file opens.
func TestOpenRegularNoFollow(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(reg, link); err != nil {
		t.Fatal(err)
	}
	dirLink := filepath.Join(t.TempDir(), "dir")
	if err := os.Symlink(dir, dirLink); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{reg, filepath.Join(dirLink, "reg")} {
		f, err := OpenRegularNoFollow(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil || string(b) != "contents" {
			t.Errorf("%s: read %q, %v", p, b, err)
		}
	}
	var pe *os.PathError
	if f, err := OpenRegularNoFollow(link); !errors.Is(err, ErrSymlink) || !errors.As(err, &pe) || pe.Path != link {
		t.Errorf("OpenRegularNoFollow(%s) = %v, want a path error wrapping ErrSymlink", link, err)
		if f != nil {
			f.Close()
		}
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenRegularNoFollow(fifo); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenRegularNoFollow(%s) = %v, want ErrNotRegular", fifo, err)
		if f != nil {
			f.Close()
		}
	}
}

// BenchmarkOpen compares the openers on a regular file: Open (open and
// os.NewFile's fcntl), OpenRegular (adds fstat and one fcntl) and
// os.Open.
func BenchmarkOpen(b *testing.B) {
	name := filepath.Join(b.TempDir(), "f")
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, o := range []struct {
		name string
		open func(string) (*os.File, error)
	}{{"Open", Open}, {"OpenRegular", OpenRegular}, {"os.Open", os.Open}} {
		b.Run(o.name, func(b *testing.B) {
			for b.Loop() {
				f, err := o.open(name)
				if err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	}
}
