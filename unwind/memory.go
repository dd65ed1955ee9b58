package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/sframekit/sframekit/arch"
)

// wordReader reads 8-byte words through a walk's Memory without
// allocating: the buffer lives in the (heap-allocated) Context. Reads
// inside flat, the stack copy of a FlatMemory or StackMemory, skip the
// interface call.
type wordReader struct {
	m    arch.Memory
	flat FlatMemory // Addr and Data only; empty for other memories
	be   bool
	buf  [8]byte
}

// reset makes r read m, in big-endian words if be.
func (r *wordReader) reset(m arch.Memory, be bool) {
	r.m, r.be, r.flat = m, be, FlatMemory{}
	switch m := m.(type) {
	case *FlatMemory:
		if m != nil {
			r.flat = FlatMemory{Addr: m.Addr, Data: m.Data}
		}
	case *StackMemory:
		if m != nil {
			r.flat = FlatMemory{Addr: m.SP, Data: m.Stack}
		}
	case nil:
		r.m = noMemory{}
	}
}

func (r *wordReader) word(addr uint64) (uint64, error) {
	f := &r.flat
	if off := addr - f.Addr; addr >= f.Addr && off < uint64(len(f.Data)) && uint64(len(f.Data))-off >= 8 {
		b := f.Data[off : off+8]
		if r.be {
			return binary.BigEndian.Uint64(b), nil
		}
		return binary.LittleEndian.Uint64(b), nil
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

// noMemory is the Memory of a walk given none: every read fails.
type noMemory struct{}

func (noMemory) ReadAt(p []byte, addr int64) (int, error) {
	return 0, fmt.Errorf("reading %d bytes at %#x: no memory: %w", len(p), uint64(addr), arch.ErrUnmapped)
}

// FlatMemory is an arch.Memory over a copy of one range of a target's memory,
// typically a thread's stack captured from its SP up, with reads outside
// the range passed to Next (or failing with arch.ErrUnmapped when Next
// is nil). The unwinder reads it directly, without going through the
// interface, which makes it the fastest memory to unwind from. Unlike
// StackMemory, it passes Next the reads of the stack past the copy too.
type FlatMemory struct {
	Addr uint64 // runtime address of Data[0]
	Data []byte
	Next arch.Memory
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

// ReadAt implements arch.Memory.
func (f *FlatMemory) ReadAt(p []byte, addr int64) (int, error) {
	a := uint64(addr)
	if a >= f.Addr && a-f.Addr < uint64(len(f.Data)) && uint64(len(f.Data))-(a-f.Addr) >= uint64(len(p)) {
		return copy(p, f.Data[a-f.Addr:]), nil
	}
	if f.Next != nil {
		return f.Next.ReadAt(p, addr)
	}
	return 0, fmt.Errorf("reading %d bytes at %#x: %w", len(p), a, arch.ErrUnmapped)
}

// ErrOutsideStackCopy is wrapped by the errors of StackMemory reads of
// the stack that its copy does not hold: a walk that needs them ends
// there, with StopMemory and the frames found so far.
var ErrOutsideStackCopy = errors.New("stack not in the copy")

// outsideCopyError is the error of a StackMemory read of the stack past
// its copy. A sampled walk that goes past its copy ends with it (a tenth
// of a deep program's samples): it is formatted only when printed.
type outsideCopyError struct {
	addr     uint64
	n        int
	size, sp uint64
}

func (e *outsideCopyError) Error() string {
	return fmt.Sprintf("reading %d bytes at %#x: %v (%d bytes from SP %#x)", e.n, e.addr, ErrOutsideStackCopy, e.size, e.sp)
}

func (e *outsideCopyError) Unwrap() error { return ErrOutsideStackCopy }

// StackMemory is the memory of a sampled thread as a profiler has it: a
// copy of its stack from the stack pointer up (what perf_event_open's
// PERF_SAMPLE_STACK_USER gives, with the sample's registers), and a
// Fallback for everything else the unwinder may read: code, to recognize
// signal trampolines, and what CFI expressions point to (the mapped
// files' contents, or the live process).
//
// The stack is [SP, End), or just the copy when End is 0 (not known). A
// read of the stack that the copy does not hold fails with an error
// wrapping ErrOutsideStackCopy, and is never passed to Fallback, which
// would answer it with the memory of another moment (a process that ran
// on) or of nothing: the walk stops cleanly where the copy ends. The
// unwinder reads the copy directly, as it reads a FlatMemory.
type StackMemory struct {
	SP       uint64      // the stack pointer: the address of Stack[0]
	Stack    []byte      // the copy of the stack, from SP up
	End      uint64      // the end of the stack's mapping, 0 when not known
	Fallback arch.Memory // reads outside the stack; nil makes them fail
}

// ReadAt implements arch.Memory.
func (s *StackMemory) ReadAt(p []byte, addr int64) (int, error) {
	a, n, size := uint64(addr), uint64(len(p)), uint64(len(s.Stack))
	if off := a - s.SP; a >= s.SP && off <= size && size-off >= n {
		return copy(p, s.Stack[off:]), nil
	}
	top := s.SP + size
	if top < s.SP {
		top = ^uint64(0) // a copy reaching the end of the address space
	}
	top = max(top, s.End)
	// [a, a+n) overlaps [SP, top): written so that neither end overflows.
	if a < top && (a >= s.SP || s.SP-a < n) {
		return 0, &outsideCopyError{addr: a, n: len(p), size: size, sp: s.SP}
	}
	if s.Fallback != nil {
		return s.Fallback.ReadAt(p, addr)
	}
	return 0, fmt.Errorf("reading %d bytes at %#x: %w", len(p), a, arch.ErrUnmapped)
}

// PageCache is an arch.Memory that keeps the pages it has read, so that
// walking a stack costs one read of the target per stack page instead of
// one per word (a system call each, for a live process). It is meant to
// live for one capture of a stopped target: it never invalidates. It is
// safe for concurrent use.
type PageCache struct {
	mu    sync.Mutex
	m     arch.Memory
	pages map[uint64]*[pageSize]byte
	bad   map[uint64]error
	// Limit bounds the number of cached pages (default 4096: 16 MiB).
	Limit int
}

const pageSize = 4096

// NewPageCache wraps m.
func NewPageCache(m arch.Memory) *PageCache {
	return &PageCache{m: m, pages: map[uint64]*[pageSize]byte{}, bad: map[uint64]error{}, Limit: 4096}
}

// ReadAt implements arch.Memory.
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
