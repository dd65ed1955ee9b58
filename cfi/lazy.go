package cfi

import (
	"debug/elf"
	"io"
	"sync"
)

// lazyPage is the unit lazyData reads (a variable for the tests).
var lazyPage uint64 = 4096

// lazyData fills a Table's section bytes from the file as entries are
// read, a page at a time: a table that a few lookups use (one stack
// trace) then reads a few pages instead of the whole section. The buffer
// is allocated whole but not touched: untouched pages cost no memory
// (fresh pages from the OS are zero), and each one touched is a page
// fault, which is slow in virtual machines. Clones share it.
type lazyData struct {
	mu     sync.Mutex
	src    io.ReaderAt
	filled []uint64 // one bit per page
}

// need makes data[off:off+n] (clipped to the section) hold the file's
// bytes.
func (t *Table) need(off, n uint64) error {
	l := t.lazy
	size := uint64(len(t.data))
	if off >= size {
		return nil
	}
	end := min(off+n, size)
	first, last := off/lazyPage, (end-1)/lazyPage
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := first; p <= last; {
		if l.filled[p/64]&(1<<(p%64)) != 0 {
			p++
			continue
		}
		q := p // read the run of pages not filled yet in one call
		for q+1 <= last && l.filled[(q+1)/64]&(1<<((q+1)%64)) == 0 {
			q++
		}
		lo, hi := p*lazyPage, min((q+1)*lazyPage, size)
		if n, err := l.src.ReadAt(t.data[lo:hi], int64(lo)); n < int(hi-lo) {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return t.errAt(lo, "reading the section: %v", err)
		}
		for ; p <= q; p++ {
			l.filled[p/64] |= 1 << (p % 64)
		}
	}
	return nil
}

// fillAll reads the whole section of a lazy table, for the users that
// walk every entry; a read error leaves the unread part zero (it then
// decodes as a terminator).
func (t *Table) fillAll() {
	if t.lazy != nil {
		t.need(0, uint64(len(t.data)))
	}
}

// FromELFLazy is FromELF for a table that few lookups will use: the
// section's bytes are read from f as lookups reach them, through its
// .eh_frame_hdr search table, instead of all at once. f must stay open
// while the table is used. It is FromELF for what it cannot read that
// way: .debug_frame, a section without a usable .eh_frame_hdr (lookups
// would index every entry), a compressed section or a relocatable object.
// The buffer is allocated once the section's last byte was read from the
// file: a size field larger than the file costs nothing.
func FromELFLazy(f *elf.File, section string) (*Table, error) {
	s := f.Section(".eh_frame")
	h := f.Section(".eh_frame_hdr")
	if section != "" && section != ".eh_frame" || s == nil || h == nil || h.Type == elf.SHT_NOBITS ||
		s.Type == elf.SHT_NOBITS || s.Flags&elf.SHF_COMPRESSED != 0 || f.Type == elf.ET_REL || s.Size >= 1<<32 {
		return FromELF(f, section)
	}
	hd, err := h.Data()
	if err != nil {
		return FromELF(f, section)
	}
	o := Options{Kind: EHFrame, Addr: s.Addr, ByteOrder: f.ByteOrder, AddrSize: elfAddrSize(f), Arch: ArchFromELF(f.Machine),
		Hdr: hd, HdrAddr: h.Addr, ReadPointer: elfPointerReader(f)}
	if t := f.Section(".text"); t != nil {
		o.TextBase = t.Addr
	}
	if g := f.Section(".got"); g != nil {
		o.DataBase = g.Addr
	}
	// The section's last byte must be in the file: a short file would
	// leave a tail that fails to read. FromELF says why.
	var probe [1]byte
	if _, err := s.ReadAt(probe[:], int64(s.Size-1)); s.Size == 0 || err != nil {
		return FromELF(f, section)
	}
	t, err := newLazy(s.Size, s, o)
	if err != nil || t == nil { // nil: not searchable, every entry will be read
		return FromELF(f, section)
	}
	return t, nil
}

// newLazy makes a lazy .eh_frame table of size bytes read from src, or
// nil when o.Hdr is not a searchable .eh_frame_hdr.
func newLazy(size uint64, src io.ReaderAt, o Options) (*Table, error) {
	t, err := New(make([]byte, size), o)
	if err != nil || t.hdr == nil {
		return nil, err
	}
	t.lazy = &lazyData{src: src, filled: make([]uint64, (size+lazyPage*64-1)/(lazyPage*64))}
	t.name = ".eh_frame"
	return t, nil
}
