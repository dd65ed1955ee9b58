package unwind

import (
	"os"

	"github.com/sframekit/sframekit/internal/sysfile"
)

// cacheKey identifies a file's contents well enough to notice a file
// rebuilt at the same path.
type cacheKey struct {
	path  string
	size  int64
	mtime int64
	ino   uint64
}

func keyOf(path string) cacheKey {
	k := cacheKey{path: path}
	if st, err := os.Stat(path); err == nil {
		k.size, k.mtime = st.Size(), st.ModTime().UnixNano()
		k.ino = sysfile.Inode(st)
	}
	return k
}
