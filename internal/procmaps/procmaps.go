// Package procmaps reads /proc/PID/maps, the kernel's list of a
// process's memory mappings: the one parser of it, for the live-process
// target (targets) and the profiler (perfunwind, which seeds a session
// with a running process's mappings and finds its own vDSO).
package procmaps

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/sysfile"
)

// MaxSize bounds the bytes of a maps file Read reads: 64 MiB, some ten
// times what the most mappings the kernel allows by default
// (vm.max_map_count, 65530) take with ordinary path lengths. A longer
// file is an error.
const MaxSize = 64 << 20

// maxLine bounds one line (a path is at most PATH_MAX, 4 KiB, long).
const maxLine = 1 << 20

// Read reads and parses /proc/PID/maps of process pid (pid 0: the
// calling process, /proc/self/maps), without attaching to it or stopping
// it, through sysfile (a file longer than MaxSize is an error wrapping
// sysfile.ErrTooLong).
func Read(pid int) ([]arch.Mapping, error) {
	name := "/proc/self/maps"
	if pid != 0 {
		name = fmt.Sprintf("/proc/%d/maps", pid)
	}
	data, err := sysfile.ReadFileMax(name, MaxSize)
	if err != nil {
		return nil, err
	}
	ms, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return ms, nil
}

// minLine is the shortest line of a mapping: "0-1 r--p 0 0:0 0".
const minLine = 16

// Parse parses the text of a /proc/PID/maps file. A line that does not
// parse is an error naming it; lines longer than 1 MiB are an error.
func Parse(data []byte) ([]arch.Mapping, error) {
	// Sized from the lines, but never past what the data could hold: a
	// mapping's line is at least minLine bytes, where blank lines are not.
	out := make([]arch.Mapping, 0, min(bytes.Count(data, []byte{'\n'})+1, len(data)/minLine+1))
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" {
			continue
		}
		m, err := ParseLine(line)
		if err != nil {
			return nil, fmt.Errorf("maps line %d: %w", n, err)
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// ParseLine parses one line, "start-end perm offset dev inode   path";
// the path may contain spaces and is everything after the inode and its
// padding.
func ParseLine(line string) (arch.Mapping, error) {
	var m arch.Mapping
	rest := line
	field := func() (string, bool) {
		rest = strings.TrimLeft(rest, " ")
		i := strings.IndexByte(rest, ' ')
		if i < 0 {
			f := rest
			rest = ""
			return f, f != ""
		}
		f := rest[:i]
		rest = rest[i+1:]
		return f, true
	}
	rng, ok1 := field()
	perm, ok2 := field()
	off, ok3 := field()
	dev, ok4 := field()
	ino, ok5 := field()
	if !(ok1 && ok2 && ok3 && ok4 && ok5) {
		return m, fmt.Errorf("too few fields in %q", line)
	}
	dash := strings.IndexByte(rng, '-')
	if dash < 0 {
		return m, fmt.Errorf("bad range in %q", line)
	}
	var err error
	if m.Start, err = strconv.ParseUint(rng[:dash], 16, 64); err != nil {
		return m, fmt.Errorf("bad start in %q", line)
	}
	if m.End, err = strconv.ParseUint(rng[dash+1:], 16, 64); err != nil || m.End < m.Start {
		return m, fmt.Errorf("bad end in %q", line)
	}
	if m.Offset, err = strconv.ParseUint(off, 16, 64); err != nil {
		return m, fmt.Errorf("bad offset in %q", line)
	}
	if m.Inode, err = strconv.ParseUint(ino, 10, 64); err != nil {
		return m, fmt.Errorf("bad inode in %q", line)
	}
	m.Perm = perm
	m.Dev = dev
	m.Path = strings.TrimLeft(rest, " ")
	return m, nil
}

// DevNumbers returns the major and minor numbers of a mapping's device
// field (arch.Mapping.Dev, "fe:01"), as perf's MMAP2 records give them;
// ok is false when dev is not of that form.
func DevNumbers(dev string) (major, minor uint32, ok bool) {
	a, b, found := strings.Cut(dev, ":")
	if !found {
		return 0, 0, false
	}
	ma, err1 := strconv.ParseUint(a, 16, 32)
	mi, err2 := strconv.ParseUint(b, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uint32(ma), uint32(mi), true
}
