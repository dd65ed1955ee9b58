package unwind

import (
	"encoding/binary"

	"github.com/sframekit/sframekit/targets"
)

// wordReader reads 8-byte words through a targets.Memory without
// allocating: the buffer lives in the (heap-allocated) Unwinder.
type wordReader struct {
	m   targets.Memory
	be  bool
	buf [8]byte
}

func (r *wordReader) word(addr uint64) (uint64, error) {
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

// PageCache is a targets.Memory that keeps the pages it has read, so that
// walking a stack costs one read of the target per stack page instead of
// one per word (a system call each, for a live process). It is meant to
// live for one capture of a stopped target: it never invalidates.
type PageCache struct {
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
