//go:build !linux

package perfdata

import "os"

// newChunkMem returns the memory of a chunk and the function that
// releases it.
func newChunkMem() ([]byte, func()) { return make([]byte, chunkMem), func() {} }

// readChunk reads len(b) bytes at offset off of f.
func readChunk(f *os.File, b []byte, off int64) (int, error) { return f.ReadAt(b, off) }
