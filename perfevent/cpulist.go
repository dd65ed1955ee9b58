package perfevent

import (
	"fmt"
	"strconv"
	"strings"
)

// maxCPUs bounds a CPU list, so that a bad range does not allocate
// without limit.
const maxCPUs = 1 << 16

// parseCPUList parses a kernel CPU list such as "0-3,8,10-11".
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad CPU list %q", s)
			}
		}
		if b >= maxCPUs || len(cpus)+b-a+1 > maxCPUs {
			return nil, fmt.Errorf("CPU list %q names more than %d CPUs", s, maxCPUs)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
