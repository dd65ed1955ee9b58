// Package sysfile opens and reads files with fewer system calls than
// package os, for the regular files and /proc files that sframe stack
// reads on every run, and opens the files that untrusted input names (a
// recording's MMAP2 records, a core's NT_FILE note, a sysroot or --symfs
// path, /proc/PID/maps) only when they are regular files (OpenRegular).
//
// os.Open makes a descriptor non-blocking and offers it to the runtime's
// poller, which refuses regular files, and then makes it blocking again:
// six system calls (four fcntl and an epoll_ctl besides the open), and
// the poller's creation (three more) on the first. Open makes the same
// *os.File with two (open and one fcntl, in os.NewFile). On the 2-vCPU
// VM of docs/PERFORMANCE.md a system call costs 1-2 us; a capture opens
// a dozen files.
package sysfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrNotRegular is wrapped by OpenRegular's error for a path that names
// a FIFO, a device, a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

// ErrSymlink is wrapped by OpenRegularNoFollow's error for a path whose
// last component is a symbolic link.
var ErrSymlink = errors.New("a symbolic link, not followed")

// ErrTooLong is wrapped by ReadFileMax's error for a file longer than
// its limit.
var ErrTooLong = errors.New("file too long")

// ReadFileMax reads the whole of name through Open, as ReadFile does (a
// buffer that starts at 4 KB and grows as the file turns out longer:
// files of /proc have no size to start from), but at most limit bytes: a
// longer file is an error wrapping ErrTooLong, found once limit+1 bytes
// are read.
func ReadFileMax(name string, limit int) ([]byte, error) {
	f, err := Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 0, min(4096, max(limit, 1)))
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > limit {
			return nil, &os.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w (over %d bytes)", ErrTooLong, limit)}
		}
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

// Under returns the path of name (a path a recording or a core names,
// absolute or not) inside the directory root (--symfs, a sysroot), as
// perf's --symfs joins them, but cleaned first so that its ".." at the
// root go no higher: the result never leaves root lexically. With root
// "" it is name as it is.
func Under(root, name string) string {
	if root == "" {
		return name
	}
	return filepath.Join(root, filepath.Clean(string(filepath.Separator)+name))
}
