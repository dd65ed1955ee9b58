//go:build unix

package sysfile

import (
	"os"
	"syscall"
)

// Inode returns the inode number of the file fi describes, which tells a
// file replaced at the same path from the one read before, or 0 where
// the system gives none.
func Inode(fi os.FileInfo) uint64 {
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Ino)
	}
	return 0
}
