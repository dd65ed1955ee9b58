package perfevent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
)

// Tasks returns the thread IDs of process pid (/proc/PID/task), in
// increasing order.
func Tasks(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, procError(pid, err)
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	if len(tids) == 0 {
		return nil, fmt.Errorf("process %d: %w (no threads left)", pid, ErrNoProcess)
	}
	sort.Ints(tids)
	return tids, nil
}

// procError words a failure to read /proc/PID.
func procError(pid int, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	return fmt.Errorf("process %d: %w", pid, err)
}
