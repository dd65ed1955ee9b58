package sysfile

import (
	"os"
	"syscall"
)

// Device returns the major and minor numbers of the device holding the
// file fi describes, as /proc/PID/maps and perf's MMAP2 records give
// them: files of two file systems (two tmpfs or squashfs mounts, two
// containers' roots) may have the same inode number. ok is false where
// the system gives none.
func Device(fi os.FileInfo) (major, minor uint32, ok bool) {
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	// The kernel's encoding of dev_t for user space (glibc's
	// gnu_dev_major and gnu_dev_minor).
	d := uint64(sys.Dev)
	return uint32(d>>8&0xfff | d>>32&^0xfff), uint32(d&0xff | d>>12&^0xff), true
}
