package perfunwind

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sframekit/sframekit/internal/procmaps"
)

// SeedProcess gives the session what a recording of a process already
// running would begin with: its mappings from /proc/PID/maps and its
// threads' names from /proc/PID/task/TID/comm, as perf record synthesizes
// MMAP2 and COMM records when it attaches (-p PID). A live profiler that
// opens its events on a running process calls it before the first
// sample; later mmaps come as records. Mappings are named as perf names
// them (anonymous memory "//anon"), and only the executable ones open
// their files.
func (s *Session) SeedProcess(pid int) error {
	maps, err := procmaps.Read(pid)
	if err != nil {
		return err
	}
	p := uint32(pid)
	for _, m := range maps {
		if m.End == m.Start || len(m.Perm) < 3 {
			continue
		}
		name := m.Path
		if name == "" {
			name = "//anon" // as perf names anonymous memory
		}
		fid := fileID{ino: m.Inode}
		fid.major, fid.minor, _ = procmaps.DevNumbers(m.Dev)
		s.mmap(p, p, m.Start, m.End-m.Start, m.Offset, name, m.Exec(), nil, fid)
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, t := range tasks {
		tid, err := strconv.ParseUint(t.Name(), 10, 32)
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(fmt.Sprintf("/proc/%d/task", pid), t.Name(), "comm"))
		if err != nil {
			continue
		}
		s.Comm(p, uint32(tid), strings.TrimSuffix(string(comm), "\n"), false)
	}
	return nil
}
