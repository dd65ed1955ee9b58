//go:build unix

package perfunwind

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the regular file f of the given size read-only, or reads
// it where it cannot be mapped.
func mapFile(f *os.File, size int64) ([]byte, func() error, bool, error) {
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		b, err := os.ReadFile(f.Name())
		return b, func() error { return nil }, false, err
	}
	return b, func() error { return unix.Munmap(b) }, true, nil
}
