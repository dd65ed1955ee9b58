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
	"path/filepath"
)

// ErrNotRegular is wrapped by OpenRegular's error for a path that names
// a FIFO, a device, a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

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
