package targets

import (
	"fmt"
	"os"
)

// MapsEntry is one line of /proc/PID/maps.
type MapsEntry struct {
	// Start and End delimit the mapping, [Start, End).
	Start, End uint64
	// Offset is the file offset mapped at Start.
	Offset uint64
	// Perm is the permission string ("r-xp").
	Perm string
	// Dev is the file's device as "major:minor" in hexadecimal ("fe:01").
	Dev string
	// Inode is the file's inode number, 0 for anonymous memory.
	Inode uint64
	// Path is the file name, possibly ending in " (deleted)", a special
	// area such as "[vdso]" or "[stack]", or empty.
	Path string
}

// ReadMaps reads /proc/PID/maps of a live process, without attaching to
// it or stopping it: what a sampling profiler knows of the mappings made
// before it started recording.
func ReadMaps(pid int) ([]MapsEntry, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	lines, err := parseMaps(data)
	if err != nil {
		return nil, fmt.Errorf("/proc/%d/maps: %w", pid, err)
	}
	out := make([]MapsEntry, len(lines))
	for i, l := range lines {
		out[i] = MapsEntry{Start: l.start, End: l.end, Offset: l.offset, Perm: l.perm, Dev: l.dev, Inode: l.inode, Path: l.path}
	}
	return out, nil
}
