//go:build !linux

package prefault

// Heap does nothing on systems other than Linux.
func Heap(n uintptr) (start, length uintptr, err error) { return 0, 0, nil }
