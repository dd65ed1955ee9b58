package hugeheap

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestReserve checks that memory allocated after Reserve lies in a
// mapping that may take huge pages (/proc/self/smaps: THPeligible), where
// the system gives them on request.
func TestReserve(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") {
		t.Skipf("transparent huge pages not in madvise mode: %q %v", mode, err)
	}
	Reserve(32 << 20)
	b := make([]byte, 8<<20)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	eligible, err := thpEligible(addr + 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !eligible {
		t.Errorf("memory allocated after Reserve, at %#x, is not eligible for huge pages", addr)
	}
}

// thpEligible reports whether the mapping holding addr has THPeligible 1.
func thpEligible(addr uintptr) (bool, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, ' '); i > 0 && strings.Contains(line[:i], "-") {
			lo, hi, _ := strings.Cut(line[:i], "-")
			a, _ := strconv.ParseUint(lo, 16, 64)
			b, _ := strconv.ParseUint(hi, 16, 64)
			in = uint64(addr) >= a && uint64(addr) < b
			continue
		}
		if in && strings.HasPrefix(line, "THPeligible:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "THPeligible:")) == "1", nil
		}
	}
	return false, fmt.Errorf("no mapping holds %#x", addr)
}
