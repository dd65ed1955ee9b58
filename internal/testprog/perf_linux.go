package testprog

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// NeedPerfEvents skips the test when this machine refuses
// perf_event_open (a container without it, perf_event_paranoid 3 and no
// capability), and fails it under CI, where it must work.
func NeedPerfEvents(t testing.TB) {
	t.Helper()
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size: uint32(unix.PERF_ATTR_SIZE_VER7), Sample: 1000000, Bits: unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("perf_event_open: %v; required under CI", err)
		}
		t.Skipf("perf_event_open refused here: %v", err)
	}
	unix.Close(fd)
}
