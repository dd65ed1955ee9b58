package sysfile

import (
	"math"
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

// OpenRegular opens name for reading if it is a regular file, and
// otherwise returns an *os.PathError wrapping ErrNotRegular, without
// waiting: it opens with O_NONBLOCK (a FIFO's open then returns at once
// instead of waiting for a writer, a terminal's or modem's does not wait
// for carrier) and O_NOCTTY, checks the type with fstat on the open
// descriptor (so a file swapped after a check is still refused), and
// makes a regular file's descriptor blocking again. Every file that a
// recording, a core, a sysroot or /proc names is opened through it: a
// FIFO or device named there would otherwise hang or disturb the command.
// Four system calls.
func OpenRegular(name string) (*os.File, error) { return openRegular(name, 0) }

// OpenRegularNoFollow is OpenRegular, but a symbolic link as name's last
// component is refused (an error wrapping ErrSymlink) instead of
// followed: for files in a directory every user may write to (a JIT's
// /tmp/perf-PID.map), where a planted link would have the reader copy
// another file's contents into its output.
func OpenRegularNoFollow(name string) (*os.File, error) {
	f, err := openRegular(name, unix.O_NOFOLLOW)
	if pe, ok := err.(*os.PathError); ok && pe.Err == unix.ELOOP {
		pe.Err = ErrSymlink
	}
	return f, err
}

func openRegular(name string, flags int) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY|flags, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	var st unix.Stat_t
	for {
		err = unix.Fstat(fd, &st)
		if err != unix.EINTR {
			break
		}
	}
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		err = ErrNotRegular
	}
	if err == nil {
		err = unix.SetNonblock(fd, false)
	}
	if err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// ReadFile reads the whole of name, as os.ReadFile does, through Open and
// a buffer that starts at 4 KB: files of /proc have no size to start
// from.
func ReadFile(name string) ([]byte, error) {
	return ReadFileMax(name, math.MaxInt)
}
