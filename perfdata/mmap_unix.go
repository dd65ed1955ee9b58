//go:build unix

package perfdata

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps f read-only. The file must not shrink while mapped (perf
// itself maps its input the same way). mapped is false when f was read
// into memory instead (a file system that cannot map).
func mapFile(f *os.File, size int64) (b []byte, release func() error, mapped bool, err error) {
	if size == 0 {
		return nil, func() error { return nil }, false, nil
	}
	if int64(int(size)) != size {
		return nil, nil, false, errorf(ErrLimit, 0, "file of %d bytes cannot be mapped", size)
	}
	b, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		// Fall back to reading (a file system that cannot map).
		b, err := os.ReadFile(f.Name())
		return b, func() error { return nil }, false, err
	}
	return b, func() error { return unix.Munmap(b) }, true, nil
}
