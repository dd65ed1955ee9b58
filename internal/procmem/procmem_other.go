//go:build !linux

package procmem

import "errors"

// Reader reads nothing here: this system has no process_vm_readv.
type Reader struct{}

// New returns a Reader whose reads fail.
func New(pid int) *Reader { return &Reader{} }

// Read fails: this system has no process_vm_readv.
func Read(pid int, b []byte, addr int64) (int, error) { return 0, errUnsupported }

// ReadAt fails: this system has no process_vm_readv.
func (r *Reader) ReadAt(b []byte, addr int64) (int, error) { return 0, errUnsupported }

// Close does nothing.
func (r *Reader) Close() {}

var errUnsupported = errors.New("reading another process's memory is not supported on this system")
