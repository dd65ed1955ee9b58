//go:build !unix

package jitmap

import (
	"fmt"
	"os"
)

// openNoFollow opens path for reading, refusing a symbolic link as its
// last component (checked before the open: systems without O_NOFOLLOW
// have no perf maps of their own, only copied ones to read).
func openNoFollow(path string) (*os.File, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s: a symbolic link, not followed", path)
	}
	return os.Open(path)
}
