//go:build !linux

package perfdata

// newChunkMem returns the memory of a chunk.
func newChunkMem() []byte { return make([]byte, chunkMem) }
