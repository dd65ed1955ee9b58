package sframe

import "math/bits"

// lookupIndex sits in front of the function table of a sorted section, so
// that a lookup touches three cache lines (a bucket, a record, the FREs)
// instead of the ~17 table entries a binary search over 100,000 functions
// reads, plus the v3 FDE attribute:
//
//   - recs holds, per function, what a lookup needs in 16 bytes: start
//     (as an offset from the first function), size, the section offset of
//     the first FRE, the FRE count and the two info bytes;
//   - buckets maps a PC to the small run of functions that can contain
//     it: bucket k covers offsets [k<<shift, (k+1)<<shift), and
//     buckets[k] counts the functions starting before the bucket. The
//     shift is chosen for about one function per bucket.
//
// It is built once, on the first lookup, for sections flagged sorted whose
// functions decode, span less than 4 GiB and have at most 65535 FREs each;
// other sections are searched in the table itself. Its size is bounded by
// the number of functions, which Parse checked against the section size.
type lookupIndex struct {
	base    uint64
	shift   uint
	recs    []funcRec
	buckets []uint32
}

type funcRec struct {
	start  uint32 // function start - base
	size   uint32
	frePos uint32 // section offset of the first FRE
	meta   uint32 // NumFREs | Info<<16 | x<<24, x = Info2 (v3) or RepSize (v2)
}

func (s *Section) buildIndex() {
	n := int(s.hdr.NumFDEs)
	if n == 0 || s.hdr.Flags&FlagFDESorted == 0 || uint64(len(s.data)) > 0xffffffff {
		return
	}
	recs := make([]funcRec, n)
	var f Func
	var base uint64
	for i := 0; i < n; i++ {
		if s.decodeFunc(i, &f) != nil || f.NumFREs > 0xffff {
			return
		}
		if i == 0 {
			base = f.Start
		}
		d := f.Start - base
		if d > 0xffffffff || (i > 0 && uint32(d) < recs[i-1].start) {
			return // too wide or not sorted after all: search the table
		}
		x := f.Info2
		if s.hdr.Version == Version2 {
			x = f.RepSize
		}
		recs[i] = funcRec{start: uint32(d), size: f.Size, frePos: uint32(f.frePos),
			meta: f.NumFREs | uint32(f.Info)<<16 | uint32(x)<<24}
	}
	span := uint64(recs[n-1].start) + 1
	shift := uint(0)
	if per := span / uint64(n); per > 1 {
		shift = uint(bits.Len64(per - 1))
	}
	nb := int(span>>shift) + 2
	buckets := make([]uint32, nb)
	k := 0
	for b := 0; b < nb; b++ {
		lim := uint64(b) << shift
		for k < n && uint64(recs[k].start) < lim {
			k++
		}
		buckets[b] = uint32(k)
	}
	s.idx = lookupIndex{base: base, shift: shift, recs: recs, buckets: buckets}
}

// find returns the last function whose start is <= pc, or -1.
func (x *lookupIndex) find(pc uint64) int {
	if pc < x.base {
		return -1
	}
	key := pc - x.base
	b := key >> x.shift
	if b >= uint64(len(x.buckets)-1) {
		return len(x.recs) - 1
	}
	// Functions [0, buckets[b]) start before the bucket, so the answer is
	// at least buckets[b]-1; functions from buckets[b+1] on start after
	// it.
	lo := int(x.buckets[b]) - 1
	hi := int(x.buckets[b+1])
	if lo < 0 {
		lo = 0
	}
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if uint64(x.recs[m].start) <= key {
			lo = m
		} else {
			hi = m
		}
	}
	if uint64(x.recs[lo].start) > key {
		return -1
	}
	return lo
}

// funcAt fills f from record i without reading the function table: what
// the record does not hold is derived from it (start field, FRE offset)
// or read beside the FREs (the v3 repeat size, whose info2 byte the
// record holds; v2 has no info2, and its slot holds the repeat size).
func (s *Section) funcAt(i int, f *Func) {
	r := &s.idx.recs[i]
	f.Index = i
	f.ver = s.hdr.Version
	f.Start = s.idx.base + uint64(r.start)
	f.Size = r.size
	f.NumFREs = r.meta & 0xffff
	f.Info = uint8(r.meta >> 16)
	f.Info2 = 0
	f.frePos = int(r.frePos)
	f.StartFieldOff = s.fdeBase + i*s.fdeSize
	f.StartField = int64(f.Start - s.addr)
	if s.hdr.Flags&FlagFuncStartPCRel != 0 && s.hdr.Version != Version1 {
		f.StartField -= int64(f.StartFieldOff)
	}
	f.FREOff = uint32(f.frePos - s.freBase)
	f.RepSize = 0
	switch s.hdr.Version {
	case Version3:
		f.FREOff -= FDEAttrSize
		f.Info2 = uint8(r.meta >> 24)
		f.RepSize = s.data[f.frePos-1]
	case Version2:
		f.RepSize = uint8(r.meta >> 24)
	default:
		if f.PCType() == PCMask {
			f.RepSize = v1PLTEntrySize
		}
	}
}
