//go:build unix

package memtest

import (
	"os"
	"runtime"
	"syscall"
)

// maxRSS returns the peak RSS of an exited child in bytes: getrusage's
// ru_maxrss is in kilobytes, but in bytes on macOS.
func maxRSS(ps *os.ProcessState) (int64, bool) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, false
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss), true
	}
	return int64(ru.Maxrss) * 1024, true
}
