package perfunwind

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return err
	}
	p := uint32(pid)
	sc := bufio.NewScanner(bytes.NewReader(maps))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		m, ok := parseMapsLine(sc.Text())
		if !ok {
			continue
		}
		s.Mmap(p, p, m.start, m.end-m.start, m.offset, m.name, m.exec, nil)
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
	return sc.Err()
}

// mapsLine is a line of /proc/PID/maps.
type mapsLine struct {
	start, end, offset uint64
	exec               bool
	name               string
}

// parseMapsLine parses "start-end perm offset dev inode   path", the path
// being the rest of the line (it may hold spaces); anonymous memory is
// named "//anon", as perf names it.
func parseMapsLine(line string) (mapsLine, bool) {
	var m mapsLine
	fields := strings.Fields(line)
	if len(fields) < 5 {
		return m, false
	}
	lo, hi, ok := strings.Cut(fields[0], "-")
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	off, err3 := strconv.ParseUint(fields[2], 16, 64)
	if !ok || err1 != nil || err2 != nil || err3 != nil || end <= start || len(fields[1]) < 3 {
		return m, false
	}
	m.start, m.end, m.offset, m.exec = start, end, off, fields[1][2] == 'x'
	m.name = "//anon"
	if len(fields) > 5 {
		// The path: what follows the inode and its padding.
		rest := line
		for range 5 {
			rest = strings.TrimLeft(rest, " ")
			rest = rest[strings.IndexByte(rest, ' ')+1:]
		}
		m.name = strings.TrimLeft(rest, " ")
	}
	return m, true
}
