package perfevent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/sframekit/sframekit/targets"
)

// The kernel records only what happens after the events are enabled: the
// mappings and threads of a process that was running before are read
// from /proc, as perf synthesizes them. Read them after Session.Enable, so
// that nothing falls between the two; what is seen twice is the same.

// Thread is a thread of a process found in /proc/PID/task.
type Thread struct {
	TID  int
	Comm string // its name, as COMM records carry it
}

// Mapping is an executable mapping of /proc/PID/maps: what an MMAP2
// record says of a mapping made after the events were enabled.
type Mapping struct {
	// Start and End delimit the mapping, [Start, End); an MMAP2 record's
	// Addr and Addr+Len.
	Start, End uint64
	// Offset is the file offset mapped at Start (Pgoff).
	Offset uint64
	// Perm is the permission string ("r-xp").
	Perm string
	// Maj, Min and Inode identify the file, as in MMAP2.
	Maj, Min uint32
	Inode    uint64
	// Path is the file name (Filename), or a special area such as
	// "[vdso]".
	Path string
}

// Process is what /proc says of a running process.
type Process struct {
	PID     int
	Comm    string // the main thread's name
	Threads []Thread
	// Mappings are the executable mappings, sorted by address: the
	// modules an unwinder needs.
	Mappings []Mapping
}

// ReadProcess reads the threads and executable mappings of process pid
// from /proc, without stopping it. A process that does not exist is an
// error wrapping ErrNoProcess; a thread that exits while it is listed is
// left out.
func ReadProcess(pid int) (*Process, error) {
	tids, err := Tasks(pid)
	if err != nil {
		return nil, err
	}
	p := &Process{PID: pid, Comm: readComm(pid, pid)}
	for _, tid := range tids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", pid, tid)); err != nil {
			continue // exited since listed
		}
		p.Threads = append(p.Threads, Thread{TID: tid, Comm: readComm(pid, tid)})
	}
	maps, err := targets.ReadMaps(pid)
	if err != nil {
		return nil, procError(pid, err)
	}
	for _, m := range maps {
		if !strings.Contains(m.Perm, "x") {
			continue
		}
		mp := Mapping{Start: m.Start, End: m.End, Offset: m.Offset, Perm: m.Perm, Inode: m.Inode, Path: m.Path}
		if maj, min, ok := strings.Cut(m.Dev, ":"); ok {
			a, _ := strconv.ParseUint(maj, 16, 32)
			b, _ := strconv.ParseUint(min, 16, 32)
			mp.Maj, mp.Min = uint32(a), uint32(b)
		}
		p.Mappings = append(p.Mappings, mp)
	}
	return p, nil
}

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

// readComm returns the name of thread tid of pid, or "".
func readComm(pid, tid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, tid))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}
