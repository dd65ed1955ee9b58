package perfunwind

import (
	"os"
	"sync"

	"github.com/sframekit/sframekit/internal/procmaps"
)

var (
	vdsoOnce  sync.Once
	vdsoImage []byte
	vdsoID    []byte
)

// ownVDSO returns the image of this process's vDSO and its build ID, or
// nil when it cannot be read (not Linux, no /proc). The vDSO is the same
// in every process of a kernel: it stands for the recorded one when their
// build IDs agree, as perf uses its own when its cache has none.
func ownVDSO() ([]byte, []byte) {
	vdsoOnce.Do(func() {
		maps, err := procmaps.Read(0)
		if err != nil {
			return
		}
		for _, m := range maps {
			if m.Path != "[vdso]" {
				continue
			}
			start, end := m.Start, m.End
			if end <= start || end-start > 1<<24 {
				return
			}
			mem, err := os.Open("/proc/self/mem")
			if err != nil {
				return
			}
			img := make([]byte, end-start)
			_, err = mem.ReadAt(img, int64(start))
			mem.Close()
			if err != nil {
				return
			}
			_, id, err := readELFInfo(bytesReaderAt(img), int64(len(img)))
			if err != nil {
				return
			}
			vdsoImage, vdsoID = img, id
			return
		}
	})
	return vdsoImage, vdsoID
}
