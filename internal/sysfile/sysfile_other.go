//go:build !linux

package sysfile

import (
	"fmt"
	"os"
)

// Open is os.Open.
func Open(name string) (*os.File, error) { return os.Open(name) }

// ReadFile is os.ReadFile.
func ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }

// OpenRegular opens name for reading if it is a regular file, and
// otherwise returns an *os.PathError wrapping ErrNotRegular. Without
// O_NONBLOCK the type is checked before the open (a FIFO's open would
// wait for a writer) and again on the open file.
func OpenRegular(name string) (*os.File, error) {
	if st, err := os.Stat(name); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, &os.PathError{Op: "open", Path: name, Err: ErrNotRegular}
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (changed while opened)", ErrNotRegular)}
	}
	return f, nil
}

// OpenRegularNoFollow is OpenRegular, but a symbolic link as name's last
// component is refused (an error wrapping ErrSymlink), checked before the
// open: systems without O_NOFOLLOW in package os.
func OpenRegularNoFollow(name string) (*os.File, error) {
	if st, err := os.Lstat(name); err != nil {
		return nil, err
	} else if st.Mode()&os.ModeSymlink != 0 {
		return nil, &os.PathError{Op: "open", Path: name, Err: ErrSymlink}
	}
	return OpenRegular(name)
}
