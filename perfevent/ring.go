package perfevent

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Offsets of the data area's fields in struct perf_event_mmap_page, the
// first page of a ring buffer mapping.
const (
	offDataHead   = 1024
	offDataTail   = 1032
	offDataOffset = 1040
	offDataSize   = 1048
	metaSize      = offDataSize + 8
)

// maxRecordSize bounds a record: its size is a 16-bit field.
const maxRecordSize = 1<<16 - 1

// ring reads the records of one perf ring buffer: a metadata page (struct
// perf_event_mmap_page) and a data area whose size is a power of two.
//
// The kernel writes records at data_head and may overwrite nothing before
// data_tail: the reader loads data_head with acquire semantics (so that
// the records before it are visible), reads the records in place, and
// only then stores data_tail with release semantics (so that its reads
// are done before the kernel may reuse the space). sync/atomic's loads and
// stores are sequentially consistent, which includes both.
type ring struct {
	head, tail *uint64 // data_head and data_tail in the metadata page
	data       []byte
	mask       uint64
	pos        uint64 // the next record's position; data_tail once released
	scratch    []byte // a record that wraps around the end of data
	cpu        int

	mem []byte // the whole mapping, for munmap
	fd  int    // the event whose mapping it is

	// Counters, added to once per read so that Stats may read them while
	// Run runs.
	records, wrapped, bytes, corrupt atomic.Uint64
}

// newRing makes a ring over mem, a mapping of a perf event's ring buffer
// (or a test's imitation of one), whose first pageSize bytes are the
// metadata page. It fails unless the data area the metadata page
// describes lies in mem and has a power-of-two size.
func newRing(mem []byte, pageSize int) (*ring, error) {
	if pageSize < metaSize || len(mem) < 2*pageSize {
		return nil, fmt.Errorf("ring mapping of %d bytes, page size %d", len(mem), pageSize)
	}
	if uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, fmt.Errorf("ring mapping not 8-byte aligned")
	}
	off, size := ne.Uint64(mem[offDataOffset:]), ne.Uint64(mem[offDataSize:])
	if size == 0 {
		// Kernels before 4.1 leave these 0: the data follows the first page.
		off, size = uint64(pageSize), uint64(len(mem)-pageSize)
	}
	if off%8 != 0 || size < 8 || size&(size-1) != 0 || off > uint64(len(mem)) || size > uint64(len(mem))-off {
		return nil, fmt.Errorf("ring data area of %d bytes at %d in a %d-byte mapping", size, off, len(mem))
	}
	r := &ring{
		head: (*uint64)(unsafe.Pointer(&mem[offDataHead])),
		tail: (*uint64)(unsafe.Pointer(&mem[offDataTail])),
		data: mem[off : off+size : off+size],
		mask: size - 1,
		mem:  mem,
		fd:   -1,
	}
	r.pos = atomic.LoadUint64(r.tail)
	return r, nil
}

// read calls fn with each record that the kernel has completed, in order,
// then releases them to the kernel. raw is the whole record, header
// included: a view into the ring, or, when the record wraps around the end
// of the data area (wrapped), a copy in the ring's scratch buffer; either
// is valid only until fn returns. If fn returns false, read stops after
// that record, leaving the later ones for the next read. read returns the
// number of records passed to fn.
//
// A record header that cannot be right (shorter than a header, not a
// multiple of 8 bytes, or reaching past data_head) means the reader lost
// its place: read drops everything up to data_head and counts it in
// corrupt, since no later record boundary can be trusted.
func (r *ring) read(fn func(raw []byte, wrapped bool) bool) int {
	head := atomic.LoadUint64(r.head)
	pos := r.pos
	n, wrapped := 0, 0
	start := pos
	for pos != head {
		avail := head - pos
		if avail > uint64(len(r.data)) || avail < headerSize {
			r.corrupt.Add(1)
			pos = head
			break
		}
		off := pos & r.mask
		size := uint64(ne.Uint16(r.data[off+6:]))
		if size < headerSize || size%8 != 0 || size > avail {
			r.corrupt.Add(1)
			pos = head
			break
		}
		var raw []byte
		w := off+size > uint64(len(r.data))
		if !w {
			raw = r.data[off : off+size : off+size]
		} else {
			if r.scratch == nil {
				r.scratch = make([]byte, maxRecordSize+1)
			}
			k := copy(r.scratch, r.data[off:])
			copy(r.scratch[k:size], r.data)
			raw = r.scratch[:size:size]
			wrapped++
		}
		pos += size
		n++
		if !fn(raw, w) {
			break
		}
	}
	if pos != r.pos {
		r.pos = pos
		atomic.StoreUint64(r.tail, pos)
	}
	r.records.Add(uint64(n))
	r.wrapped.Add(uint64(wrapped))
	r.bytes.Add(pos - start)
	return n
}
