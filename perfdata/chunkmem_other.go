//go:build !linux

package perfdata

// newChunkMem returns the memory of a chunk and the function that
// releases it.
func newChunkMem() ([]byte, func()) { return make([]byte, chunkMem), func() {} }
