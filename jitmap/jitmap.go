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
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"io"
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
	syms  []Symbol
	spans []span // sorted, not overlapping
	// symUnwind gives each symbol its unwinding data, an index into
	// unwinds or -1; nil when no symbol has any. A symbol past its end
	// has none.
	symUnwind []int32
	unwinds   []*Unwinding
	// Skipped counts the entries that could not be read (malformed or
	// too long lines, records of unknown code).
	Skipped int
	// Truncated says entries past MaxEntries, or the end of a jitdump
	// file cut inside a record, were dropped.
	Truncated bool
}

// Len returns the number of functions read.
func (t *Table) Len() int { return len(t.syms) }

// Lookup returns the function at the runtime address addr, without
// allocating.
func (t *Table) Lookup(addr uint64) (Symbol, bool) {
	if t == nil {
		return Symbol{}, false
	}
	i, ok := t.lookup(addr)
	if !ok {
		return Symbol{}, false
	}
	return t.syms[i], true
}

// lookup returns the index of the symbol at addr.
func (t *Table) lookup(addr uint64) (int32, bool) {
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
	if t == nil || t.symUnwind == nil {
		return Symbol{}, nil, false
	}
	i, ok := t.lookup(addr)
	if !ok || int(i) >= len(t.symUnwind) || t.symUnwind[i] < 0 {
		return Symbol{}, nil, false
	}
	return t.syms[i], t.unwinds[t.symUnwind[i]], true
}

// setUnwind gives the last symbol added the unwinding data u (-1: none).
func (t *Table) setUnwind(u int32) {
	for len(t.symUnwind) < len(t.syms)-1 {
		t.symUnwind = append(t.symUnwind, -1)
	}
	t.symUnwind = append(t.symUnwind, u)
}

// build makes t's lookup spans from t.syms, later symbols taking the
// addresses they share with earlier ones: a sweep over the starts and
// ends, each elementary range given the latest symbol covering it.
func (t *Table) build() {
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
	if len(t.syms) >= MaxEntries {
		t.Truncated = true
		return false
	}
	t.syms = append(t.syms, s)
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
	text := string(data)
	// Sized from the lines up front: a table grown by appends leaves
	// its outgrown copies (up to MaxEntries' worth) to the collector,
	// which makes the peak memory depend on when it runs.
	t := &Table{syms: make([]Symbol, 0, min(strings.Count(text, "\n")+1, MaxEntries))}
	for len(text) > 0 {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		if len(line) > MaxLine {
			t.Skipped++
			continue
		}
		start, rest, ok1 := hexField(line)
		size, name, ok2 := hexField(rest)
		if !ok1 || !ok2 || name == "" {
			if line != "" {
				t.Skipped++
			}
			continue
		}
		if !t.add(Symbol{Name: name, Start: start, Size: size}) {
			break
		}
	}
	if cap(t.syms) > 2*len(t.syms)+64 {
		// Mostly lines that were not entries: the table keeps only
		// what it holds.
		t.syms = slices.Clone(t.syms)
	}
	t.build()
	return t
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
	f, err := sysfile.OpenRegularNoFollow(path)
	if errors.Is(err, sysfile.ErrNotRegular) || errors.Is(err, sysfile.ErrSymlink) {
		return nil, fmt.Errorf("%s: %w", path, errors.Unwrap(err)) // not a failed open: the file is refused
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d read of a JIT's symbol file", path, st.Size(), MaxFileSize)
	}
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
