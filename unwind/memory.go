package unwind

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/sframekit/sframekit/targets"
)

// wordReader reads 8-byte words through a targets.Memory without
// allocating: the buffer lives in the (heap-allocated) Unwinder. Reads
// inside a FlatMemory's bytes skip the interface call.
type wordReader struct {
	m    targets.Memory
	flat *FlatMemory
	be   bool
	buf  [8]byte
}

func (r *wordReader) word(addr uint64) (uint64, error) {
	if f := r.flat; f != nil {
		if off := addr - f.Addr; addr >= f.Addr && off < uint64(len(f.Data)) && uint64(len(f.Data))-off >= 8 {
			b := f.Data[off : off+8]
			if r.be {
				return binary.BigEndian.Uint64(b), nil
			}
			return binary.LittleEndian.Uint64(b), nil
		}
	}
	if _, err := r.m.ReadAt(r.buf[:], int64(addr)); err != nil {
		return 0, err
	}
	if r.be {
		return binary.BigEndian.Uint64(r.buf[:]), nil
	}
	return binary.LittleEndian.Uint64(r.buf[:]), nil
}

// ReadUint64 lets the CFI expression evaluator read through the same path.
func (r *wordReader) ReadUint64(addr uint64) (uint64, error) { return r.word(addr) }

// FlatMemory is a targets.Memory over a copy of one range of a target's
// memory, typically a thread's stack captured from its SP up, with reads
// outside the range passed to Next (or failing with targets.ErrUnmapped
// when Next is nil). The unwinder reads it directly, without going through
// the interface, which makes it the fastest memory to unwind from.
type FlatMemory struct {
	Addr uint64 // runtime address of Data[0]
	Data []byte
	Next targets.Memory
}

// word reads the little-endian word at addr, if it lies in f's bytes:
// the fast path's read, small enough to be inlined.
func (f *FlatMemory) word(addr uint64) (uint64, bool) {
	if o := addr - f.Addr; o < uint64(len(f.Data)) {
		if b := f.Data[o:]; len(b) >= 8 {
			return binary.LittleEndian.Uint64(b), true
		}
	}
	return 0, false
}

// ReadAt implements targets.Memory.
func (f *FlatMemory) ReadAt(p []byte, addr int64) (int, error) {
	a := uint64(addr)
	if a >= f.Addr && a-f.Addr < uint64(len(f.Data)) && uint64(len(f.Data))-(a-f.Addr) >= uint64(len(p)) {
		return copy(p, f.Data[a-f.Addr:]), nil
	}
	if f.Next != nil {
		return f.Next.ReadAt(p, addr)
	}
	return 0, fmt.Errorf("unwind: reading %d bytes at %#x: %w", len(p), a, targets.ErrUnmapped)
}

// PageCache is a targets.Memory that keeps the pages it has read, so that
// walking a stack costs one read of the target per stack page instead of
// one per word (a system call each, for a live process). It is meant to
// live for one capture of a stopped target: it never invalidates. It is
// safe for concurrent use.
type PageCache struct {
	mu    sync.Mutex
	m     targets.Memory
	pages map[uint64]*[pageSize]byte
	bad   map[uint64]error
	// Limit bounds the number of cached pages (default 4096: 16 MiB).
	Limit int
}

const pageSize = 4096

// NewPageCache wraps m.
func NewPageCache(m targets.Memory) *PageCache {
	return &PageCache{m: m, pages: map[uint64]*[pageSize]byte{}, bad: map[uint64]error{}, Limit: 4096}
}

// ReadAt implements targets.Memory.
func (c *PageCache) ReadAt(p []byte, addr int64) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := uint64(addr)
	n := 0
	for n < len(p) {
		base := (a + uint64(n)) &^ (pageSize - 1)
		pg, err := c.page(base)
		if err != nil {
			// Fall back to a direct read: the page may be partly mapped.
			m, err := c.m.ReadAt(p[n:], int64(a+uint64(n)))
			return n + m, err
		}
		n += copy(p[n:], pg[a+uint64(n)-base:])
	}
	return n, nil
}

func (c *PageCache) page(base uint64) (*[pageSize]byte, error) {
	if pg, ok := c.pages[base]; ok {
		return pg, nil
	}
	if err, ok := c.bad[base]; ok {
		return nil, err
	}
	pg := new([pageSize]byte)
	if _, err := c.m.ReadAt(pg[:], int64(base)); err != nil {
		if len(c.bad) < c.Limit {
			c.bad[base] = err
		}
		return nil, err
	}
	if len(c.pages) < c.Limit {
		c.pages[base] = pg
	}
	return pg, nil
}
