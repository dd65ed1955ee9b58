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
// the system gives them on request, and in one that may not where the
// host takes free memory back.
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
	if want := !hostReclaims(balloonDir); eligible != want {
		t.Errorf("memory allocated after Reserve, at %#x: eligible for huge pages %v, want %v (host reclaims free memory: %v)", addr, eligible, want, !want)
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

// TestHostReclaims reads balloon devices laid out as sysfs lays them out,
// with the features of a Firecracker guest's balloon (free page
// reporting: bit 5) and of one without it.
func TestHostReclaims(t *testing.T) {
	const (
		reporting = "01100101000000000000000000000000100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\n"
		statsOnly = "01100000000000000000000000000000100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\n"
	)
	for _, c := range []struct {
		name    string
		devices []string // features of virtio0, virtio1, ...
		want    bool
	}{
		{"no balloon", nil, false},
		{"reporting", []string{reporting}, true},
		{"statistics only", []string{statsOnly}, false},
		{"second device reports", []string{statsOnly, reporting}, true},
		{"empty features", []string{""}, false},
	} {
		dir := t.TempDir()
		for i, f := range c.devices {
			dev := fmt.Sprintf("%s/virtio%d", dir, i)
			if err := os.Mkdir(dev, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dev+"/features", []byte(f), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if c.devices == nil {
			dir += "/absent"
		}
		if got := hostReclaims(dir); got != c.want {
			t.Errorf("%s: hostReclaims = %v, want %v", c.name, got, c.want)
		}
	}
}
