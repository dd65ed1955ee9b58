//go:build !unix

package sysfile

import "os"

// Inode returns 0: this system's file information has no inode number.
func Inode(os.FileInfo) uint64 { return 0 }
