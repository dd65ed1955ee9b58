package perfunwind

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync"
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
		f, err := os.Open("/proc/self/maps")
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasSuffix(line, "[vdso]") {
				continue
			}
			rng, _, _ := strings.Cut(line, " ")
			lo, hi, ok := strings.Cut(rng, "-")
			if !ok {
				return
			}
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || end <= start || end-start > 1<<24 {
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
