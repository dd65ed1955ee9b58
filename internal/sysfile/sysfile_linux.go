package sysfile

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Open opens name for reading, as os.Open does, for a file that the
// runtime's poller cannot wait for (a regular file, a directory, a file
// of /proc): reads and writes block, as they do with os.Open for such
// files.
func Open(name string) (*os.File, error) {
	for {
		fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

// ReadFile reads the whole of name, as os.ReadFile does, through Open and
// a buffer that starts at 4 KB: files of /proc have no size to start
// from.
func ReadFile(name string) ([]byte, error) {
	f, err := Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 0, 4096)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}
