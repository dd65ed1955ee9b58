package sysfile

import (
	"os"
	"syscall"
	"time"
)

// ChangeTime returns when the file fi describes last changed its inode
// (contents, links, a rename), or the zero time where the system gives
// none. Unlike the modification time, which a copy or a package manager
// sets to the original's, it tells when a file came to its path.
func ChangeTime(fi os.FileInfo) time.Time {
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(sys.Ctim.Unix())
	}
	return time.Time{}
}
