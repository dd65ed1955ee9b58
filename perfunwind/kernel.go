package perfunwind

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"unsafe"

	"github.com/sframekit/sframekit/elffile"
)

// kernelSyms are the kernel's function symbols, as /proc/kallsyms lists
// them. The kernel's own symbols come first, sorted by address (the
// kernel looks them up by binary search itself): they are searched in the
// file's text as it is, so that loading costs no parse of a hundred
// thousand lines of which a recording names a few thousand. Those after
// them (modules, BPF programs, trampolines: lines with a "\t[module]"
// tag) are parsed and sorted.
type kernelSyms struct {
	text    string
	core    int      // text[:core]: the kernel's lines, sorted
	addrs   []uint64 // the other functions, sorted
	offs    []uint32 // offset of each one's line in text
	release func() error
}

// isFunc reports whether a kallsyms symbol type is a function's.
func isFunc(t byte) bool { return t == 't' || t == 'T' || t == 'w' || t == 'W' }

// maxLine bounds the bytes of a kallsyms line (KSYM_NAME_LEN is 512, to
// which come the address, type and module tag): a longer one does not
// parse, and lookups look no further than that for a line's ends, so
// that a crafted file of long lines costs a lookup what short ones do.
const maxLine = 1024

// parseLine parses the kallsyms line at text[off:]: "ADDR TYPE NAME" and
// an optional "\tMODULE" up to the newline.
func (k *kernelSyms) parseLine(off int) (addr uint64, typ byte, name, mod string, ok bool) {
	line := k.text[off:min(off+maxLine, len(k.text))]
	if j := indexByte(line, '\n'); j >= 0 {
		line = line[:j]
	} else if off+maxLine < len(k.text) {
		return 0, 0, "", "", false // too long
	}
	sp := indexByte(line, ' ')
	if sp <= 0 || sp > 16 || sp+3 >= len(line) || line[sp+2] != ' ' {
		return 0, 0, "", "", false
	}
	if addr, ok = parseHex(line[:sp]); !ok {
		return 0, 0, "", "", false
	}
	name = line[sp+3:]
	if j := indexByte(name, '\t'); j >= 0 {
		name, mod = name[:j], name[j+1:]
		if len(mod) >= 2 && mod[0] == '[' && mod[len(mod)-1] == ']' {
			mod = mod[1 : len(mod)-1]
		}
	}
	return addr, line[sp+1], name, mod, true
}

// maxKernAddrs bounds the kernel addresses a Session (their mappings)
// and a Resolver (their names) remember, each emptied when full: a long
// recording samples the kernel at ever more addresses.
const maxKernAddrs = 1 << 16

// maxKallsyms bounds the bytes of a kallsyms file read (a kernel with
// every module loaded lists about 20 MB).
const maxKallsyms = 256 << 20

// loadKallsyms opens a kallsyms file: mapped when it is a regular file
// (perf's copy in its build-ID cache), else read (/proc/kallsyms, whose
// size is not known). A file whose addresses are all zero
// (kernel.kptr_restrict) gives an error.
func loadKallsyms(path string) (*kernelSyms, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var data []byte
	release := func() error { return nil }
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > 0 && st.Size() <= maxKallsyms {
		data, release, _, err = mapFile(f, st.Size())
		if err != nil {
			return nil, err
		}
	} else {
		if data, err = readAllInto(f, make([]byte, 0, 64<<10), maxKallsyms+1); err != nil {
			return nil, err
		}
		if len(data) > maxKallsyms {
			return nil, fmt.Errorf("%s: more than %d bytes", path, maxKallsyms)
		}
	}
	// The names are substrings of the file's text, which is not copied:
	// data is not changed or reused after this.
	k := &kernelSyms{text: unsafe.String(unsafe.SliceData(data), len(data)), release: release}
	k.core = firstTabLine(data)
	// Some function with an address must be there: the first of the
	// kernel's, or of the rest.
	nonzero := false
	for off, n := 0, 0; off < k.core && n < 64; n++ {
		if a, t, _, _, ok := k.parseLine(off); ok && isFunc(t) {
			nonzero = a != 0
			break
		}
		off += indexByte(k.text[off:], '\n') + 1
		if off == 0 {
			break
		}
	}
	sorted := true
	for off := k.core; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if end >= 0 {
			next = off + end + 1
		}
		if a, t, _, _, ok := k.parseLine(off); ok && isFunc(t) && off < 1<<32 {
			nonzero = nonzero || a != 0
			if n := len(k.addrs); n > 0 && a < k.addrs[n-1] {
				sorted = false
			}
			k.addrs = append(k.addrs, a)
			k.offs = append(k.offs, uint32(off))
		}
		off = next
	}
	if !nonzero {
		release()
		return nil, fmt.Errorf("%s: no addresses (kernel.kptr_restrict)", path)
	}
	if !sorted {
		sort.Stable(k)
	}
	return k, nil
}

// firstTabLine returns the start of the first line of data holding a
// tab (a module's symbol), or len(data): those lines come last, so a
// binary search over the text finds it, reading a few pages of a file of
// megabytes where a scan would read them all (on a virtual machine,
// faulting in its pages cost as much as the recording's symbols). A file
// whose first line has a tab is parsed whole. One whose tabs are
// otherwise not all at its end gets some of them taken for the kernel's
// own lines, which the search over the text expects in address order:
// some of those may be missed.
func firstTabLine(data []byte) int {
	if i := bytes.IndexByte(data, '\n'); bytes.IndexByte(data[:max(i, 0)], '\t') >= 0 || i < 0 && bytes.IndexByte(data, '\t') >= 0 {
		return 0
	}
	lo, hi := 0, len(data) // lo is a line's start; lines before it have no tab
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		ls := bytes.LastIndexByte(data[lo:mid], '\n') + 1 + lo
		le := len(data)
		if i := bytes.IndexByte(data[ls:], '\n'); i >= 0 {
			le = ls + i
		}
		if bytes.IndexByte(data[ls:le], '\t') >= 0 {
			hi = ls
		} else {
			lo = le + 1
		}
	}
	return min(lo, len(data))
}

// close releases the mapping.
func (k *kernelSyms) close() {
	if k != nil && k.release != nil {
		k.release()
		k.release = nil
	}
}

// parseHex parses up to 16 hexadecimal digits.
func parseHex(s string) (uint64, bool) {
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, len(s) > 0 && len(s) <= 16
}

// sort.Interface of the parsed symbols, by address.
func (k *kernelSyms) Len() int           { return len(k.addrs) }
func (k *kernelSyms) Less(i, j int) bool { return k.addrs[i] < k.addrs[j] }
func (k *kernelSyms) Swap(i, j int) {
	k.addrs[i], k.addrs[j] = k.addrs[j], k.addrs[i]
	k.offs[i], k.offs[j] = k.offs[j], k.offs[i]
}

// readAllInto reads r to its end into buf, growing it, up to limit bytes.
func readAllInto(r io.Reader, buf []byte, limit int) ([]byte, error) {
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			buf = append(make([]byte, 0, 2*cap(buf)), buf...)
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), limit)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

func indexByte(s string, c byte) int { return strings.IndexByte(s, c) }

// nextLine returns the start of the line after the one at off in the
// kernel's part of the text, or the part's end; past a line longer than
// maxLine (which does not parse), the place maxLine bytes on.
func (k *kernelSyms) nextLine(off int) int {
	end := min(off+maxLine, k.core)
	if i := indexByte(k.text[off:end], '\n'); i >= 0 {
		return off + i + 1
	}
	return end
}

// lineStart returns the start of the line that holds text[at-1], at or
// after from; for a line longer than maxLine, the place maxLine bytes
// before at.
func (k *kernelSyms) lineStart(from, at int) int {
	from = max(from, at-maxLine)
	return strings.LastIndexByte(k.text[from:at], '\n') + 1 + from
}

// maxSkip bounds the lines lookup skips, at one step of its search, for
// one that parses. With maxLine, a lookup reads at most about
// log2(lines) x (maxSkip+1) x 2 x maxLine bytes of the text (35 KB a
// step), however the file is made; kallsyms itself has no such lines.
const maxSkip = 16

// lookup returns the function holding addr: the last one starting at or
// below it, with its module ("" for the kernel itself).
func (k *kernelSyms) lookup(addr uint64) (start uint64, name, mod string, ok bool) {
	if k == nil {
		return 0, "", "", false
	}
	// The kernel's own: the last line at or below addr, by binary search
	// over the text, then back to the nearest function.
	best := -1
	for lo, hi := 0, k.core; lo < hi; {
		mid := int(uint(lo+hi) >> 1)
		// lo is always a line's start. A line that does not parse is
		// skipped for the next that does, up to maxSkip of them: a
		// crafted file of garbage lines must not turn each lookup into
		// a scan of the whole text (kallsyms itself has none).
		ls := k.lineStart(lo, mid)
		pl := ls
		var a uint64
		var parsed bool
		for skip := 0; pl < hi && skip < maxSkip; skip++ {
			if a, _, _, _, parsed = k.parseLine(pl); parsed {
				break
			}
			pl = k.nextLine(pl)
		}
		if parsed && pl < hi && a <= addr {
			best, lo = pl, k.nextLine(pl)
		} else {
			hi = ls
		}
	}
	for n := 0; best >= 0 && n < 256; n++ {
		if a, t, nm, md, parsed := k.parseLine(best); parsed && isFunc(t) {
			start, name, mod, ok = a, nm, md, true
			break
		}
		if best == 0 {
			break
		}
		best = k.lineStart(0, best-1)
	}
	// The rest: a function after it may start closer to addr.
	if i := sort.Search(len(k.addrs), func(i int) bool { return k.addrs[i] > addr }) - 1; i >= 0 && (!ok || k.addrs[i] >= start) {
		a, _, nm, md, _ := k.parseLine(int(k.offs[i]))
		start, name, mod, ok = a, nm, md, true
	}
	return start, name, mod, ok
}

// kernelBuildID reads the running kernel's build ID from
// /sys/kernel/notes, or nil.
func kernelBuildID() []byte {
	data, err := os.ReadFile("/sys/kernel/notes")
	if err != nil {
		return nil
	}
	return elffile.NoteBuildID(data, binary.NativeEndian)
}

// osRelease returns the running kernel's release (uname -r), or "".
func osRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}
