package cfi

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/sframekit/sframekit/internal/byteorder"
)

// EHFrameHdr is a parsed .eh_frame_hdr: a pointer to .eh_frame and a
// table of (initial location, FDE address) pairs sorted by location,
// which lets a lookup binary-search instead of walking .eh_frame.
type EHFrameHdr struct {
	Version       uint8  // always 1
	EHFramePtrEnc PtrEnc // encoding of EHFramePtr
	FDECountEnc   PtrEnc // encoding of Count
	TableEnc      PtrEnc // encoding of both fields of each table entry
	EHFramePtr    uint64 // decoded address of .eh_frame
	Count         uint64 // number of table entries (as recorded)

	data      []byte
	addr      uint64
	order     endian
	addrSize  int
	tableOff  int // offset of the first table entry
	entrySize int // bytes per entry; 0 if entries are not fixed-size
	n         int // entries present in the section
	// keys holds the initial-location offsets of the usual datarel
	// sdata4 table, and summary every hdrBlock'th of them: the summary
	// stays in L1 cache, so a lookup misses cache only within one block.
	keys    []int32
	summary []int32
	// buckets maps a location to the few keys that can hold its entry:
	// bucket k covers offsets [bucketBase + k<<bucketShift, ... + 1<<
	// bucketShift) and holds the number of keys below its start. With
	// about one key per bucket a lookup reads one bucket and one or two
	// keys instead of searching (nil when the keys are not ascending).
	buckets     []uint32
	bucketBase  int64
	bucketShift uint
}

const hdrBlock = 16

// buildBuckets fills h.buckets from h.keys (see EHFrameHdr). Its size is
// bounded by the number of keys, itself bounded by the section size.
func (h *EHFrameHdr) buildBuckets() {
	n := len(h.keys)
	if n == 0 {
		return
	}
	base := int64(h.keys[0])
	span := int64(h.keys[n-1]) - base + 1
	if span <= 0 {
		return
	}
	shift := uint(0)
	if per := uint64(span) / uint64(n); per > 1 {
		shift = uint(bits.Len64(per - 1))
	}
	nb := int(uint64(span)>>shift) + 2
	b := make([]uint32, nb)
	k := 0
	for i := range b {
		lim := base + int64(i)<<shift
		for k < n && int64(h.keys[k]) < lim {
			k++
		}
		b[i] = uint32(k)
	}
	// Keys out of order would make the buckets lie: keep the search.
	for i := 1; i < n; i++ {
		if h.keys[i] < h.keys[i-1] {
			return
		}
	}
	h.buckets, h.bucketBase, h.bucketShift = b, base, shift
}

// bucketLE is lastLE(h.keys, v) through the buckets.
func (h *EHFrameHdr) bucketLE(v int64) int {
	if v < h.bucketBase {
		return -1
	}
	k := uint64(v-h.bucketBase) >> h.bucketShift
	if k >= uint64(len(h.buckets)-1) {
		return len(h.keys) - 1
	}
	// Keys [0, buckets[k]) lie below the bucket, so the answer is at
	// least buckets[k]-1; keys from buckets[k+1] on lie above it.
	lo := max(int(h.buckets[k])-1, 0)
	hi := int(h.buckets[k+1])
	return lo + lastLE(h.keys[lo:hi], v)
}

// ParseEHFrameHdr decodes the header of an .eh_frame_hdr section loaded at
// addr. The table itself is decoded on demand.
func ParseEHFrameHdr(data []byte, addr uint64, order binary.ByteOrder, addrSize int) (*EHFrameHdr, error) {
	herr := func(kind ErrKind, off int, format string, args ...any) error {
		return &Error{Section: ".eh_frame_hdr", Offset: uint64(off), Kind: kind, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) < 4 {
		return nil, herr(ErrTruncated, 0, "section too small")
	}
	h := &EHFrameHdr{Version: data[0], EHFramePtrEnc: PtrEnc(data[1]), FDECountEnc: PtrEnc(data[2]),
		TableEnc: PtrEnc(data[3]), data: data, addr: addr, order: byteorder.Of(order), addrSize: addrSize}
	if h.Version != 1 {
		return nil, herr(ErrUnsupported, 0, "unsupported version %d", h.Version)
	}
	b := buf{data: data, pos: 4, order: h.order}
	ctx := ptrCtx{secAddr: addr, addrSize: addrSize, data: addr}
	v, err := b.readEncoded(h.EHFramePtrEnc, &ctx)
	if err != nil {
		return nil, herr(ptrErrKind(err), 4, "eh_frame_ptr: %v", err)
	}
	h.EHFramePtr = v
	if h.FDECountEnc == PEOmit {
		h.tableOff = b.pos
		return h, nil
	}
	pos := b.pos
	c, err := b.readEncoded(h.FDECountEnc, &ctx)
	if err != nil {
		return nil, herr(ptrErrKind(err), pos, "fde_count: %v", err)
	}
	h.Count = c
	h.tableOff = b.pos
	if sz := encodedSize(h.TableEnc, addrSize); sz > 0 && h.TableEnc != PEOmit && !h.TableEnc.Indirect() &&
		(h.TableEnc.Application() == PEAbsPtr || h.TableEnc.Application() == PEDataRel || h.TableEnc.Application() == PEPCRel) {
		h.entrySize = 2 * sz
		n := uint64(len(h.data)-h.tableOff) / uint64(h.entrySize)
		if h.Count < n {
			n = h.Count
		}
		h.n = int(n)
		if h.TableEnc == PEDataRel|PESData4 && h.n > 0 {
			h.keys = make([]int32, h.n)
			h.summary = make([]int32, (h.n+hdrBlock-1)/hdrBlock)
			t := h.data[h.tableOff:]
			for i := range h.keys {
				h.keys[i] = int32(h.order.Uint32(t[8*i:]))
			}
			for i := range h.summary {
				h.summary[i] = h.keys[i*hdrBlock]
			}
			h.buildBuckets()
		}
	}
	return h, nil
}

// searchable reports whether the table can be binary-searched: fixed-size
// entries that all lie within the section.
func (h *EHFrameHdr) searchable() bool {
	if h.entrySize == 0 || h.Count == 0 || h.FDECountEnc == PEOmit || h.TableEnc == PEOmit {
		return false
	}
	avail := uint64(len(h.data) - h.tableOff)
	return h.Count <= avail/uint64(h.entrySize)
}

// Len returns the number of entries that are present in the section.
func (h *EHFrameHdr) Len() int { return h.n }

// Entry returns the i'th table entry: the initial location of an FDE and
// the FDE's address, both decoded.
func (h *EHFrameHdr) Entry(i int) (pc, fdeAddr uint64, err error) {
	if i < 0 || i >= h.Len() {
		return 0, 0, fmt.Errorf(".eh_frame_hdr entry %d out of range", i)
	}
	b := buf{data: h.data, pos: h.tableOff + i*h.entrySize, order: h.order}
	ctx := ptrCtx{secAddr: h.addr, addrSize: h.addrSize, data: h.addr}
	pc, err = b.readEncoded(h.TableEnc, &ctx)
	if err != nil {
		return
	}
	fdeAddr, err = b.readEncoded(h.TableEnc, &ctx)
	return
}

// at decodes entry i quickly for the common encodings.
func (h *EHFrameHdr) at(i int) (uint64, uint64) {
	p := h.tableOff + i*h.entrySize
	if h.TableEnc == PEDataRel|PESData4 {
		a := uint64(int64(int32(h.order.Uint32(h.data[p:]))))
		b := uint64(int64(int32(h.order.Uint32(h.data[p+4:]))))
		return a + h.addr, b + h.addr
	}
	pc, f, _ := h.Entry(i)
	return pc, f
}

// lookup returns the address of the FDE whose initial location is the
// greatest not above pc.
func (h *EHFrameHdr) lookup(pc uint64) (uint64, bool) {
	n := h.n
	if h.TableEnc == PEDataRel|PESData4 {
		// The encoding every linker emits: 8-byte entries of two int32
		// offsets from the header's address.
		// Branch-free search: the comparison result only selects the
		// next base, which the compiler turns into a conditional move.
		if n == 0 {
			return 0, false
		}
		// Entries are int32 offsets from addr; compare pc the same way,
		// clamped to just outside the range int32 can reach.
		var rel int64
		if pc >= h.addr {
			rel = int64(min(pc-h.addr, 1<<31))
		} else if h.addr-pc <= 1<<31 {
			rel = -int64(h.addr - pc)
		} else {
			return 0, false
		}
		var i int
		if h.buckets != nil {
			if i = h.bucketLE(rel); i < 0 {
				return 0, false
			}
		} else {
			s := lastLE(h.summary, rel)
			if s < 0 {
				return 0, false
			}
			lo := s * hdrBlock
			i = lo + lastLE(h.keys[lo:min(lo+hdrBlock, n)], rel)
		}
		p := h.tableOff + 8*i + 4
		return uint64(int64(int32(h.order.Uint32(h.data[p:p+4])))) + h.addr, true
	}
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if loc, _ := h.at(m); loc <= pc {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0, false
	}
	_, f := h.at(lo - 1)
	return f, true
}

// lastLE returns the index of the last key <= v in ascending keys, or -1.
// The loop has no data-dependent branch (the select compiles to a
// conditional move), which matters more than the probe count here.
func lastLE(keys []int32, v int64) int {
	if len(keys) == 0 || int64(keys[0]) > v {
		return -1
	}
	base, size := 0, len(keys)
	for size > 1 {
		half := size >> 1
		if int64(keys[base+half]) <= v {
			base += half
		}
		size -= half
	}
	return base
}
