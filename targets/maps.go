package targets

import (
	"strings"

	"github.com/sframekit/sframekit/internal/procmaps"
)

// MappedFiles returns the distinct files mapped executable in process
// pid, as /proc/PID/maps names them, without attaching to it: a caller can
// start reading their symbols and unwind tables while it attaches.
func MappedFiles(pid int) ([]string, error) {
	lines, err := procmaps.Read(pid)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, l := range lines {
		if strings.HasPrefix(l.Path, "/") && strings.Contains(l.Perm, "x") && !seen[l.Path] {
			seen[l.Path] = true
			out = append(out, l.Path)
		}
	}
	return out, nil
}
