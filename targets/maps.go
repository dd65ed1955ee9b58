package targets

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/sframekit/sframekit/internal/sysfile"
)

// mapsLine is one parsed line of /proc/PID/maps.
type mapsLine struct {
	start, end, offset uint64
	perm               string
	dev                string
	inode              uint64
	path               string
}

// parseMaps parses the text of /proc/PID/maps.
func parseMaps(data []byte) ([]mapsLine, error) {
	var out []mapsLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" {
			continue
		}
		l, err := parseMapsLine(line)
		if err != nil {
			return nil, fmt.Errorf("maps line %d: %w", n, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// parseMapsLine parses "start-end perm offset dev inode   path"; the path
// may contain spaces and is everything after the inode and its padding.
func parseMapsLine(line string) (mapsLine, error) {
	var l mapsLine
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
		return l, fmt.Errorf("too few fields in %q", line)
	}
	dash := strings.IndexByte(rng, '-')
	if dash < 0 {
		return l, fmt.Errorf("bad range in %q", line)
	}
	var err error
	if l.start, err = strconv.ParseUint(rng[:dash], 16, 64); err != nil {
		return l, fmt.Errorf("bad start in %q", line)
	}
	if l.end, err = strconv.ParseUint(rng[dash+1:], 16, 64); err != nil || l.end < l.start {
		return l, fmt.Errorf("bad end in %q", line)
	}
	if l.offset, err = strconv.ParseUint(off, 16, 64); err != nil {
		return l, fmt.Errorf("bad offset in %q", line)
	}
	if l.inode, err = strconv.ParseUint(ino, 10, 64); err != nil {
		return l, fmt.Errorf("bad inode in %q", line)
	}
	l.perm = perm
	l.dev = dev
	l.path = strings.TrimLeft(rest, " ")
	return l, nil
}

// MappedFiles returns the distinct files mapped executable in process
// pid, as /proc/PID/maps names them, without attaching to it: a caller can
// start reading their symbols and unwind tables while it attaches.
func MappedFiles(pid int) ([]string, error) {
	data, err := sysfile.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	lines, err := parseMaps(data)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, l := range lines {
		if strings.HasPrefix(l.path, "/") && strings.Contains(l.perm, "x") && !seen[l.path] {
			seen[l.path] = true
			out = append(out, l.path)
		}
	}
	return out, nil
}
