package symbolize

import (
	"debug/elf"
	"errors"
	"io"
	"slices"
	"sort"

	"github.com/sframekit/sframekit/elffile"
)

// LookupFuncs returns LookupFunc's answer for each address of addrs, in
// order, as a Symbol with Name "" where LookupFunc's ok is false. With
// Lazy set, and the object's symbols not read whole yet, it finds the
// addresses in one pass over the symbol table, reading the names of the
// winners only: no index of every function is built. It reads the table
// whole, as LookupFunc does, when one of the addresses is not inside a
// function symbol (below the first, past the end of the one before it,
// or in another section: the untyped code labels decide those) or the
// table is corrupt. With no addresses it only opens the object and finds
// its debug file: a prefetch.
func (s *Symbolizer) LookupFuncs(path string, addrs []uint64) []Symbol {
	m := s.get(path, nil)
	out := make([]Symbol, len(addrs))
	if m.err != nil || len(addrs) == 0 {
		return out
	}
	if m.lazy {
		m.symMu.Lock()
		if !m.loaded {
			s.scanMu.Lock()
			if s.scan == nil {
				s.scan = make([]byte, scanEntries*24+nameChunk)
			}
			ok := m.lookupLazy(addrs, out, s.scan)
			s.scanMu.Unlock()
			if ok {
				m.symMu.Unlock()
				return out
			}
			m.loaded = true
			m.symErr = m.readSyms("")
		}
		err := m.symErr
		m.symMu.Unlock()
		if err != nil {
			clear(out)
			return out
		}
	}
	for i, a := range addrs {
		out[i], _ = m.lookupFunc(a)
	}
	return out
}

const (
	scanEntries = 680 // symbol entries per read: 16 KB (each new page of memory is a page fault)
	nameChunk   = 256 // bytes per read of a name
)

// errLazy makes lookupLazy give up: the whole table is read instead.
var errLazy = errors.New("lazy lookup not possible")

// lazyCand is a function symbol seen by a lazy pass; name is read only
// when needed (nameOK).
type lazyCand struct {
	start, size uint64
	bind        elf.SymBind
	nameOff     uint32
	name        string
	nameOK      bool
	set         bool
}

// lookupLazy fills out with the function symbols of addrs, as lookupFunc
// would find them once the symbols are read (the same table, the same
// choice among symbols at one address), in one pass over the symbol
// table. It returns false when it cannot answer every address that way;
// out is then garbage. buf holds a read of entries and a name chunk.
// Called with m.symMu held, m not loaded.
func (m *module) lookupLazy(addrs []uint64, out []Symbol, buf []byte) bool {
	// The distinct addresses in order; addrs[i] is qs[at[i]].
	qs := slices.Clone(addrs)
	slices.Sort(qs)
	qs = slices.Compact(qs)
	// Symbols: the debug file's .symtab, else ours, else .dynsym, as
	// readSyms picks them: the first table with a function.
	type table struct {
		f   *elffile.File
		typ elf.SectionType
	}
	tables := []table{{m.dbg, elf.SHT_SYMTAB}, {m.f, elf.SHT_SYMTAB}, {m.f, elf.SHT_DYNSYM}}
	for _, t := range tables {
		if t.f == nil {
			continue
		}
		best, n, names, err := scanFuncs(t.f.File, t.typ, qs, buf)
		if err != nil {
			return false
		}
		if n == 0 {
			continue
		}
		// best[k] is the best symbol with the greatest start in
		// (qs[k-1], qs[k]]; the symbol lookupFunc picks for qs[k] starts
		// at the greatest start at or below it: the last bucket set.
		last := -1
		syms := make([]Symbol, len(qs))
		for k, q := range qs {
			if best[k].set {
				last = k
			}
			if last < 0 {
				return false // below every function: labels decide
			}
			c := &best[last]
			if c.size == 0 && !m.sameSection(c.start, q) || c.size > 0 && q-c.start >= c.size {
				return false // an enclosing symbol, or a label, decides
			}
			if !c.nameOK {
				name, err := names.read(c.nameOff)
				if err != nil {
					return false
				}
				c.name, c.nameOK = name, true
			}
			syms[k] = Symbol{Name: c.name, Start: c.start, Size: c.size, Offset: q - c.start}
		}
		for i, a := range addrs {
			k, _ := slices.BinarySearch(qs, a)
			out[i] = syms[k]
		}
		return true
	}
	return false // no function symbols: readSyms says so
}

// strtabOf returns the symbol table of type typ in f and its string
// table, as readFuncSyms finds them; nil when f has none usable, and
// errLazy when one of them is compressed (read whole instead).
func strtabOf(f *elf.File, typ elf.SectionType) (sec, str *elf.Section, err error) {
	for _, s := range f.Sections {
		if s.Type == typ {
			sec = s
			break
		}
	}
	if sec == nil || int(sec.Link) >= len(f.Sections) || sec.Link == 0 {
		return nil, nil, nil
	}
	str = f.Sections[sec.Link]
	if str.Type == elf.SHT_NOBITS {
		return nil, nil, nil
	}
	if sec.Flags&elf.SHF_COMPRESSED != 0 || str.Flags&elf.SHF_COMPRESSED != 0 {
		return nil, nil, errLazy
	}
	return sec, str, nil
}

// scanFuncs reads the function symbols of f's table of type typ (the
// entries readFuncSyms keeps, names not checked yet) and returns, for
// each bucket (qs[k-1], qs[k]] of the sorted addresses qs, the best
// symbol with the greatest start in it (better, with names read only to
// break ties), and the number of function symbols. Names that the choice
// reads must be valid (errLazy otherwise: readFuncSyms would have left
// the symbol out). It returns the reader of the names too, for the
// winners' names.
func scanFuncs(f *elf.File, typ elf.SectionType, qs []uint64, buf []byte) ([]lazyCand, int, *nameReader, error) {
	sec, str, err := strtabOf(f, typ)
	if sec == nil {
		return nil, 0, nil, err
	}
	names := &nameReader{str: str, buf: buf[len(buf)-nameChunk:], left: 2*str.Size + 64<<10}
	bo := f.ByteOrder
	is64 := f.Class == elf.ELFCLASS64
	size := 16
	if is64 {
		size = 24
	}
	ebuf := buf[:scanEntries*size]
	best := make([]lazyCand, len(qs))
	count := 0
	r, err := elffile.SectionReader(sec)
	if err != nil {
		return nil, 0, nil, err
	}
	first := true
	for {
		n, rerr := io.ReadFull(r, ebuf)
		n -= n % size
		for off := 0; off < n; off += size {
			if first {
				first = false
				continue
			}
			e := ebuf[off : off+size]
			se := decodeSym(bo, is64, e)
			c := lazyCand{nameOff: se.name, start: se.value, size: se.size}
			info, shndx := se.info, se.shndx
			t := elf.ST_TYPE(info)
			if (t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC) || elf.SectionIndex(shndx) == elf.SHN_UNDEF || c.start == 0 {
				continue
			}
			if c.nameOff == 0 || uint64(c.nameOff) >= str.Size {
				continue // no name (readFuncSyms's rule)
			}
			c.bind, c.set = elf.ST_BIND(info), true
			count++
			k := sort.Search(len(qs), func(i int) bool { return qs[i] >= c.start })
			if k == len(qs) {
				continue // above every address
			}
			b := &best[k]
			switch {
			case !b.set || c.start > b.start:
				*b = c
			case c.start == b.start:
				win, err := lazyBetter(names, &c, b)
				if err != nil {
					return nil, 0, nil, err
				}
				if win {
					*b = c
				}
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return best, count, names, nil
		}
		if rerr != nil {
			return nil, 0, nil, errLazy // readFuncSyms drops the table: read whole
		}
	}
}

// lazyBetter is better for lazy candidates, reading their names only when
// size and binding do not decide.
func lazyBetter(names *nameReader, a, b *lazyCand) (bool, error) {
	ca := cand{sym: sym{a.start, a.size, ""}, bind: a.bind}
	cb := cand{sym: sym{b.start, b.size, ""}, bind: b.bind}
	if (a.size > 0) != (b.size > 0) || bindRank(a.bind) != bindRank(b.bind) {
		return better(&ca, &cb), nil
	}
	for _, c := range []*lazyCand{a, b} {
		if !c.nameOK {
			name, err := names.read(c.nameOff)
			if err != nil {
				return false, err
			}
			c.name, c.nameOK = name, true
		}
	}
	ca.name, cb.name = a.name, b.name
	return better(&ca, &cb), nil
}

// nameReader reads names of a string table for a lazy pass, at most
// twice the table's size and 64 KiB in all (what reading the table whole
// costs, about): a crafted table whose symbols tie at one address with
// long names would otherwise have each tie read a long name again.
type nameReader struct {
	str  *elf.Section
	buf  []byte // a chunk of the table: n bytes of it, from pos, are read
	pos  uint64
	n    int
	left uint64 // bytes of names the pass may still read
}

// read reads the name at off through buf; errLazy when it is empty, not
// terminated or not readable (readFuncSyms would leave its symbol out),
// or the pass's bytes are spent (the table is then read whole).
func (nr *nameReader) read(off uint32) (string, error) {
	str := nr.str
	// A name wholly in the chunk read last is taken from it: names looked
	// up one after the other often lie side by side.
	if o := uint64(off); o >= nr.pos && o-nr.pos < uint64(nr.n) {
		b := nr.buf[o-nr.pos : nr.n]
		if i := slices.Index(b, 0); i >= 0 {
			return nr.take(b[:i])
		}
	}
	var name []byte
	for pos := uint64(off); pos < str.Size; {
		chunk := nr.buf[:min(uint64(len(nr.buf)), str.Size-pos)]
		n, err := elffile.ReadSectionAt(str, chunk, int64(pos))
		nr.pos, nr.n = pos, n
		i := slices.Index(chunk[:n], 0)
		used := uint64(n)
		if i >= 0 {
			used = uint64(i) + 1
		}
		if used > nr.left {
			return "", errLazy
		}
		nr.left -= used
		if i >= 0 {
			name = append(name, chunk[:i]...)
			if len(name) == 0 {
				return "", errLazy
			}
			return string(name), nil
		}
		if n == 0 || err != nil && err != io.EOF {
			return "", errLazy
		}
		name = append(name, chunk[:n]...)
		pos += uint64(n)
	}
	return "", errLazy
}

// take returns the name b read from the chunk, as read returns one,
// charging the budget with its bytes and terminator.
func (nr *nameReader) take(b []byte) (string, error) {
	used := uint64(len(b)) + 1
	if used > nr.left {
		return "", errLazy
	}
	nr.left -= used
	if len(b) == 0 {
		return "", errLazy
	}
	return string(b), nil
}
