package perfunwind

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"
	"unsafe"
)

// kernelSyms are the kernel's function symbols, as /proc/kallsyms lists
// them: sorted by address, each with the offset of its name in the
// file's text (names are cut out when looked up: a recording names a few
// thousand of the hundred thousand).
type kernelSyms struct {
	text  string
	addrs []uint64
	offs  []uint32 // offset of the name in text
}

// name returns the name of symbol i and its module ("" for the kernel).
func (k *kernelSyms) name(i int) (name, mod string) {
	line := k.text[k.offs[i]:]
	if j := indexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	name = line
	if j := indexByte(line, '\t'); j >= 0 {
		name, mod = line[:j], line[j+1:]
		if len(mod) >= 2 && mod[0] == '[' && mod[len(mod)-1] == ']' {
			mod = mod[1 : len(mod)-1]
		}
	}
	return name, mod
}

// maxKallsyms bounds the bytes of a kallsyms file read (a kernel with
// every module loaded lists about 20 MB).
const maxKallsyms = 256 << 20

// loadKallsyms reads a kallsyms file: "ADDR TYPE NAME [MODULE]" lines, of
// which the text symbols (t, T, w, W) are kept. A file whose addresses
// are all zero (kptr_restrict) gives an error.
func loadKallsyms(path string) (*kernelSyms, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A regular file (perf's cached copy) in one read; /proc/kallsyms,
	// whose size is unknown, in large reads.
	buf := make([]byte, 0, 64<<10)
	if st, err := f.Stat(); err == nil && st.Size() > 0 && st.Size() <= maxKallsyms {
		buf = make([]byte, 0, st.Size()+1)
	}
	data, err := readAllInto(f, buf, maxKallsyms+1)
	if err != nil {
		return nil, err
	}
	if len(data) > maxKallsyms {
		return nil, fmt.Errorf("%s: more than %d bytes", path, maxKallsyms)
	}
	// The names are substrings of the file's text, which is not copied:
	// data is not changed or reused after this.
	text := unsafe.String(unsafe.SliceData(data), len(data))
	n := len(data)/40 + 16 // lines are about 40 bytes
	k := &kernelSyms{text: text, addrs: make([]uint64, 0, n), offs: make([]uint32, 0, n)}
	nonzero, sorted := false, true
	for pos := 0; pos < len(data); {
		end := bytes.IndexByte(data[pos:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += pos
		}
		line := text[pos:end]
		start := pos
		pos = end + 1
		// ADDR TYPE NAME[\t[MODULE]]
		sp := indexByte(line, ' ')
		if sp <= 0 || sp > 16 || sp+3 >= len(line) || line[sp+2] != ' ' {
			continue
		}
		switch line[sp+1] {
		case 't', 'T', 'w', 'W':
		default:
			continue
		}
		addr, ok := parseHex(line[:sp])
		if !ok || start+sp+3 > 1<<32-1 {
			continue
		}
		nonzero = nonzero || addr != 0
		if n := len(k.addrs); n > 0 && addr < k.addrs[n-1] {
			sorted = false
		}
		k.addrs = append(k.addrs, addr)
		k.offs = append(k.offs, uint32(start+sp+3))
	}
	if !nonzero {
		return nil, fmt.Errorf("%s: no addresses (kernel.kptr_restrict)", path)
	}
	if !sorted {
		sort.Stable(k)
	}
	return k, nil
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

// sort.Interface, by address.
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

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// lookup returns the index of the symbol holding addr: the last one
// starting at or below it, or -1.
func (k *kernelSyms) lookup(addr uint64) int {
	if k == nil {
		return -1
	}
	i := sort.Search(len(k.addrs), func(i int) bool { return k.addrs[i] > addr }) - 1
	return i
}

// kernelBuildID reads the running kernel's build ID from
// /sys/kernel/notes, or nil.
func kernelBuildID() []byte {
	data, err := os.ReadFile("/sys/kernel/notes")
	if err != nil {
		return nil
	}
	return noteBuildID(data, binary.NativeEndian)
}

// osRelease returns the running kernel's release (uname -r), or "".
func osRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}
