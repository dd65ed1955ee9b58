// Package jitmap names code that a JIT compiler made at run time, from
// the two files JITs write for perf: perf maps (/tmp/perf-PID.map, one
// "START SIZE NAME" line per function: node --perf-basic-prof, Python's
// -X perf, LuaJIT, Java agents) and jitdump files (jit-PID.dump, binary
// records of loaded and moved code, which the JIT maps into its address
// space so that a recording's MMAP record names the file; see perf's
// Documentation/jitdump-specification.txt).
//
// Both are written by the profiled program and read as untrusted input:
// a file is read only when it is a regular file, up to MaxFileSize
// bytes; at most MaxEntries functions are kept; a perf map line longer
// than MaxLine bytes is skipped. A Table is immutable once made and its
// lookups do not allocate.
package jitmap

import (
	"bytes"
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/sframekit/sframekit/internal/sysfile"
)

// The limits on what a file may cost.
const (
	// MaxFileSize bounds the bytes read of a perf map or jitdump file: a
	// large Java or node program writes a few tens of MB. With the copy
	// of a perf map's text that its names share and the Table, a file
	// costs at most about 200 MB.
	MaxFileSize = 64 << 20
	// MaxEntries bounds the functions a Table keeps (32 bytes each, and
	// as much again for lookups: 128 MiB at most); entries past it are
	// dropped and Table.Truncated is set.
	MaxEntries = 1 << 21
	// EntryBytes is about what a Table keeps per function: the Symbol
	// and its share of the lookup spans. Callers that bound the memory
	// of many tables count it.
	EntryBytes = 64
	// MaxLine bounds a perf map line; longer ones are skipped (counted in
	// Table.Skipped). Java's longest signatures take a few KB.
	MaxLine = 64 << 10
)

// Symbol is one function of JIT code: Name at runtime addresses
// [Start, Start+Size). A Size of 0 covers Start alone.
type Symbol struct {
	Name        string
	Start, Size uint64
}

// span is a range of addresses [start, end) and the symbol named there.
type span struct {
	start, end uint64
	sym        int32
}

// Table is the functions of one file, looked up by address. Where two
// entries overlap (the JIT placed new code where old code was), the one
// written later names the addresses they share.
type Table struct {
	// segment holds the newest entries; older, the entries of the table
	// this one extends (AppendPerfMap), newest first, shared with it:
	// at most about log2(MaxEntries) of them, each at least twice the
	// size of the one before.
	segment
	older []*segment
	n     int // entries in all segments
	// Skipped counts the entries that could not be read (malformed or
	// too long lines, records of unknown code).
	Skipped int
	// Truncated says entries past MaxEntries, or the end of a jitdump
	// file cut inside a record, were dropped.
	Truncated bool
}

// segment is entries of a table and their lookup spans.
type segment struct {
	syms  []Symbol
	spans []span // sorted, not overlapping
	// symUnwind gives each symbol its unwinding data, an index into
	// unwinds or -1; nil when no symbol has any. A symbol past its end
	// has none.
	symUnwind []int32
	unwinds   []*Unwinding
}

// Len returns the number of functions read.
func (t *Table) Len() int { return t.n }

// Lookup returns the function at the runtime address addr, without
// allocating.
func (t *Table) Lookup(addr uint64) (Symbol, bool) {
	seg, i, ok := t.find(addr)
	if !ok {
		return Symbol{}, false
	}
	return seg.syms[i], true
}

// find returns the segment naming addr and the index of its symbol
// there: the newest segment that covers addr has the latest entry.
func (t *Table) find(addr uint64) (*segment, int32, bool) {
	if t == nil {
		return nil, 0, false
	}
	if i, ok := t.segment.lookup(addr); ok {
		return &t.segment, i, true
	}
	for _, seg := range t.older {
		if i, ok := seg.lookup(addr); ok {
			return seg, i, true
		}
	}
	return nil, 0, false
}

// lookup returns the index of the symbol at addr.
func (t *segment) lookup(addr uint64) (int32, bool) {
	lo, hi := 0, len(t.spans)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.spans[m].start <= addr {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 || addr >= t.spans[lo-1].end {
		return 0, false
	}
	return t.spans[lo-1].sym, true
}

// LookupUnwinding returns the function at the runtime address addr and
// the unwinding data its jitdump record gave it (see Unwinding), without
// allocating; false when the function has none, or there is no function
// at addr.
func (t *Table) LookupUnwinding(addr uint64) (Symbol, *Unwinding, bool) {
	seg, i, ok := t.find(addr)
	if !ok || int(i) >= len(seg.symUnwind) || seg.symUnwind[i] < 0 {
		return Symbol{}, nil, false
	}
	return seg.syms[i], seg.unwinds[seg.symUnwind[i]], true
}

// setUnwind gives the last symbol added the unwinding data u (-1: none).
func (t *segment) setUnwind(u int32) {
	for len(t.symUnwind) < len(t.syms)-1 {
		t.symUnwind = append(t.symUnwind, -1)
	}
	t.symUnwind = append(t.symUnwind, u)
}

// build makes t's lookup spans from t.syms, later symbols taking the
// addresses they share with earlier ones: a sweep over the starts and
// ends, each elementary range given the latest symbol covering it.
func (t *segment) build() {
	type edge struct {
		at    uint64
		sym   int32
		start bool
	}
	edges := make([]edge, 0, 2*len(t.syms))
	for i, s := range t.syms {
		end := s.Start + max(s.Size, 1)
		if end < s.Start {
			end = ^uint64(0) // to the end of the address space
		}
		edges = append(edges, edge{s.Start, int32(i), true}, edge{end, int32(i), false})
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Compare(a.at, b.at) })
	// active holds the symbols covering the current position, latest on
	// top; ended ones are removed lazily.
	active := &latest{}
	ended := make([]bool, len(t.syms))
	spans := make([]span, 0, len(t.syms))
	cur, curStart := int32(-1), uint64(0)
	for i := 0; i < len(edges); {
		at := edges[i].at
		for ; i < len(edges) && edges[i].at == at; i++ {
			if edges[i].start {
				active.s = append(active.s, edges[i].sym)
				heap.Fix(active, len(active.s)-1)
			} else {
				ended[edges[i].sym] = true
			}
		}
		for len(active.s) > 0 && ended[active.s[0]] {
			// Pop without heap.Pop's boxing of the value.
			n := len(active.s) - 1
			active.s[0] = active.s[n]
			active.s = active.s[:n]
			if n > 0 {
				heap.Fix(active, 0)
			}
		}
		w := int32(-1)
		if len(active.s) > 0 {
			w = active.s[0]
		}
		if w != cur {
			if cur >= 0 {
				spans = append(spans, span{start: curStart, end: at, sym: cur})
			}
			cur, curStart = w, at
		}
	}
	t.spans = spans
}

// latest is a max-heap of symbol indexes (container/heap), the latest
// symbol on top; it is grown and shrunk by hand, with heap.Fix, so that
// no index is boxed.
type latest struct{ s []int32 }

func (h *latest) Len() int           { return len(h.s) }
func (h *latest) Less(i, j int) bool { return h.s[i] > h.s[j] }
func (h *latest) Swap(i, j int)      { h.s[i], h.s[j] = h.s[j], h.s[i] }
func (h *latest) Push(x any)         { h.s = append(h.s, x.(int32)) }
func (h *latest) Pop() any {
	v := h.s[len(h.s)-1]
	h.s = h.s[:len(h.s)-1]
	return v
}

// add appends a symbol, reporting false when the table is full.
func (t *Table) add(s Symbol) bool {
	if t.n >= MaxEntries {
		t.Truncated = true
		return false
	}
	t.syms = append(t.syms, s)
	t.n++
	return true
}

// ParsePerfMap reads a perf map: lines "START SIZE NAME", START and SIZE
// in hexadecimal with or without 0x (perf reads them with strtoull, base
// 16; the JVM's -XX:+DumpPerfMapAtExit and jcmd Compiler.perfmap write
// 0x00007f9d8cec8120), NAME the rest of the
// line, spaces included. Malformed lines and lines over MaxLine bytes
// are skipped, as perf skips malformed ones; at most MaxEntries are kept.
// The names are substrings of one copy of data.
func ParsePerfMap(data []byte) *Table {
	return (*Table)(nil).AppendPerfMap(data)
}

// AppendPerfMap returns the table of t's perf map followed by the lines
// in data (t nil: none), which name the addresses they share with t's
// entries, read as ParsePerfMap reads them: the table of a map that a
// JIT appends to, read a part at a time. The new table shares t's
// entries (t is not changed); its own names are substrings of one copy
// of data.
func (t *Table) AppendPerfMap(data []byte) *Table {
	nt := &Table{}
	if t != nil {
		nt.n, nt.Skipped, nt.Truncated = t.n, t.Skipped, t.Truncated
		nt.older = make([]*segment, 0, len(t.older)+1)
		if len(t.syms) > 0 {
			nt.older = append(nt.older, &t.segment)
		}
		nt.older = append(nt.older, t.older...)
	}
	text := string(data)
	// Sized from the lines up front: a table grown by appends leaves
	// its outgrown copies (up to MaxEntries' worth) to the collector,
	// which makes the peak memory depend on when it runs.
	nt.syms = make([]Symbol, 0, min(strings.Count(text, "\n")+1, MaxEntries-nt.n))
	for len(text) > 0 {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		if len(line) > MaxLine {
			nt.Skipped++
			continue
		}
		start, rest, ok1 := hexField(line)
		size, name, ok2 := hexField(rest)
		if !ok1 || !ok2 || name == "" {
			if line != "" {
				nt.Skipped++
			}
			continue
		}
		if !nt.add(Symbol{Name: name, Start: start, Size: size}) {
			break
		}
	}
	// Merged with older segments no more than twice its size: their
	// sizes then at least double from one to the next, so that lookups
	// search a few segments, and an entry is copied into a merged
	// segment about log2 of the table's size times over its life.
	// (A jitdump file's segment, with unwinding data, is not merged.)
	for len(nt.older) > 0 && len(nt.older[0].syms) <= 2*len(nt.syms) && nt.older[0].symUnwind == nil {
		o := nt.older[0]
		nt.syms = append(slices.Clip(o.syms), nt.syms...)
		nt.older = nt.older[1:]
	}
	if cap(nt.syms) > 2*len(nt.syms)+64 {
		// Mostly lines that were not entries: the table keeps only
		// what it holds.
		nt.syms = slices.Clone(nt.syms)
	}
	nt.build()
	return nt
}

// hexField parses a hexadecimal number at the start of s, after an
// optional 0x, followed by one space, and returns it and what follows
// the space.
func hexField(s string) (uint64, string, bool) {
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = s[2:]
	}
	var v uint64
	i := 0
	for ; i < len(s) && i < 17; i++ {
		c := s[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			goto done
		}
		v = v<<4 | uint64(d)
	}
done:
	if i == 0 || i > 16 || i >= len(s) || s[i] != ' ' {
		return 0, "", false
	}
	return v, s[i+1:], true
}

// ReadFile reads the file at path for ParsePerfMap or ParseJitdump: only
// a regular file (a FIFO or device is not opened for reading, and a
// FIFO's open does not wait for a writer), up to MaxFileSize bytes. A
// symbolic link as the last component is not followed: /tmp is open to
// every user, and a link planted as /tmp/perf-PID.map would have the
// profiler copy lines of another file into a profile.
func ReadFile(path string) ([]byte, error) {
	f, st, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The JIT may still be appending: read what is there, up to the bound.
	data := make([]byte, 0, st.Size()+1)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if errors.Is(err, io.EOF) || n == 0 && err == nil {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			if len(data) >= MaxFileSize {
				return data[:MaxFileSize], nil
			}
			data = slices.Grow(data, min(len(data), MaxFileSize-len(data)))
		}
	}
}

// open opens a JIT's file at path as ReadFile reads it, refusing what it
// refuses.
func open(path string) (*os.File, os.FileInfo, error) {
	f, err := sysfile.OpenRegularNoFollow(path)
	if errors.Is(err, sysfile.ErrNotRegular) || errors.Is(err, sysfile.ErrSymlink) {
		return nil, nil, fmt.Errorf("%s: %w", path, errors.Unwrap(err)) // not a failed open: the file is refused
	}
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil && st.Size() > MaxFileSize {
		err = fmt.Errorf("%s: %d bytes, more than the %d read of a JIT's symbol file", path, st.Size(), MaxFileSize)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// PerfMap reads a perf map that its JIT keeps appending to (perf maps
// are append-only text), for a profiler that names JIT code again and
// again while the program runs: each Read parses only the bytes written
// since the last one, and the table it returns shares the entries read
// before (AppendPerfMap). A last line without its newline yet is parsed
// for that Read's table only, and read again by the next. The map is
// read whole again when it is another file than the one read (another
// path, device or inode), or was cut or rewritten: shorter than what was
// parsed, or no longer a newline where the last line parsed ended. The
// zero value is ready to use; a PerfMap is not safe for concurrent use.
type PerfMap struct {
	path string
	info os.FileInfo // of the file read
	off  int64       // bytes of whole lines parsed into base
	base *Table      // the entries of those lines
	tail int64       // bytes of the last line, without its newline, of the last Read
}

// Read returns the table of the perf map at path (read as ReadFile reads
// it, refusing what it refuses) as the file is now, and how many bytes
// of it this call read. When the file cannot be opened, what was read
// before is kept for the next Read, of this path or another (a caller
// that tries a few paths); set m to its zero value to let it go.
func (m *PerfMap) Read(path string) (*Table, int64, error) {
	f, st, err := open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	size := st.Size()
	if m.base != nil && (path != m.path || !os.SameFile(st, m.info) || size < m.off || !endsLine(f, m.off)) {
		*m = PerfMap{}
	}
	m.path, m.info = path, st
	// The bytes the file has now; a JIT appending meanwhile is read the
	// next time.
	data := make([]byte, size-m.off)
	n, err := f.ReadAt(data, m.off)
	if err != nil && !errors.Is(err, io.EOF) {
		*m = PerfMap{}
		return nil, int64(n), err
	}
	data = data[:n]
	whole := bytes.LastIndexByte(data, '\n') + 1
	if whole > 0 || m.base == nil {
		m.base = m.base.AppendPerfMap(data[:whole])
		m.off += int64(whole)
	}
	m.tail = int64(len(data) - whole)
	if m.tail == 0 {
		return m.base, int64(n), nil
	}
	return m.base.AppendPerfMap(data[whole:]), int64(n), nil
}

// Bytes returns the bytes of the file that the last Read's table holds
// (its names are substrings of them).
func (m *PerfMap) Bytes() int64 { return m.off + m.tail }

// endsLine reports whether the byte before off in f is a newline (or
// off is 0): a map rewritten since, no shorter than before, most often
// is not.
func endsLine(f *os.File, off int64) bool {
	if off == 0 {
		return true
	}
	var b [1]byte
	_, err := f.ReadAt(b[:], off-1)
	return err == nil && b[0] == '\n'
}
