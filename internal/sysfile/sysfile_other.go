//go:build !linux

package sysfile

import "os"

// Open is os.Open.
func Open(name string) (*os.File, error) { return os.Open(name) }

// ReadFile is os.ReadFile.
func ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }
