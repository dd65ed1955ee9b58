//go:build unix

package jitmap

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openNoFollow opens path for reading without following a symbolic link
// as its last component, and without waiting for a FIFO's writer.
func openNoFollow(path string) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_NOFOLLOW, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err == unix.ELOOP {
		return nil, fmt.Errorf("%s: a symbolic link, not followed", path)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
