package hugeheap

import (
	"os"
	"path/filepath"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/internal/sysfile"
)

const hugePage = 2 << 20

func reserve(n int) {
	if n < 2*hugePage || hostReclaims(balloonDir) {
		return
	}
	b := make([]byte, n)
	a := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (hugePage - 1))
	if err := unix.Madvise(b[a:a+(n-a)&^(hugePage-1)], unix.MADV_HUGEPAGE); err != nil {
		return
	}
	runtime.KeepAlive(b)
	b = nil
	runtime.GC()
}

// balloonDir holds the virtio balloon devices, one directory each.
const balloonDir = "/sys/bus/virtio/drivers/virtio_balloon"

// hostReclaims reports whether a virtio balloon device under dir reports
// free memory to its host (the feature VIRTIO_BALLOON_F_REPORTING): the
// host then takes back each free block of 2 MiB or more about 2 s after
// it is freed, so that a huge page the guest makes of one later is fresh
// host memory. On a virtual machine of docs/PERFORMANCE.md such a page cost
// 1.5-2 ms a MiB to fault in, 4 KiB pages 0.4 ms ("Sixth pass"). Reads
// a directory and a file of a few hundred bytes per device.
func hostReclaims(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		b, err := sysfile.ReadFileMax(filepath.Join(dir, e.Name(), "features"), 4096)
		if err == nil && reportsFreePages(b) {
			return true
		}
	}
	return false
}

// reportingBit is VIRTIO_BALLOON_F_REPORTING, the feature bit of free page
// reporting (linux/virtio_balloon.h).
const reportingBit = 5

// reportsFreePages reports whether features, a virtio device's "features"
// file in sysfs (one '0' or '1' per feature bit, bit 0 first), has free
// page reporting.
func reportsFreePages(features []byte) bool {
	return len(features) > reportingBit && features[reportingBit] == '1'
}
