package perfdata

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/sframekit/sframekit/internal/byteorder"
)

// Words is a view of consecutive 64-bit words of a record, in the file's
// byte order. It shares the record's bytes and is valid as long as the
// record is.
type Words struct {
	b []byte
	o binary.ByteOrder
}

// Len returns the number of words.
func (w Words) Len() int { return len(w.b) / 8 }

// At returns word i; it panics if i is out of range, as a slice would.
func (w Words) At(i int) uint64 { return w.o.Uint64(w.b[8*i : 8*i+8]) }

// Bytes returns the words' raw bytes.
func (w Words) Bytes() []byte { return w.b }

// Regs is a register dump (REGS_USER, REGS_INTR): the registers whose perf
// numbers are set in Mask, in increasing order of number. ABI is
// RegsABI64, RegsABI32, or RegsABINone when the sample has no registers
// (a kernel thread, for user registers).
type Regs struct {
	ABI  uint64
	Mask uint64
	Words
}

// Get returns the register with perf number n (see DWARFRegister), and
// whether the dump has it.
func (r Regs) Get(n int) (uint64, bool) {
	if n < 0 || n >= 64 || r.Mask&(1<<n) == 0 || r.Len() == 0 {
		return 0, false
	}
	return r.At(bits.OnesCount64(r.Mask & (1<<n - 1))), true
}

// BranchEntry is one taken branch of a branch stack. Flags is the raw
// bit-field word (mispred, predicted, in_tx, abort, cycles, type, ...).
type BranchEntry struct {
	From, To, Flags uint64
}

// Branches is a branch stack, most recent branch first.
type Branches struct{ Words }

// Len returns the number of entries.
func (b Branches) Len() int { return len(b.b) / 24 }

// At returns entry i.
func (b Branches) At(i int) BranchEntry {
	w := b.b[24*i : 24*i+24]
	return BranchEntry{b.o.Uint64(w), b.o.Uint64(w[8:]), b.o.Uint64(w[16:])}
}

// ReadValues are counter values (PERF_SAMPLE_READ, READ records), laid out
// as Format says: one counter, or a group of them.
type ReadValues struct {
	Format ReadFormat
	Words
}

// Counter is one counter of ReadValues. ID and Lost are zero unless the
// format has FormatID, FormatLost.
type Counter struct {
	Value, ID, Lost uint64
}

func (r ReadValues) perCounter() int {
	n := 1
	if r.Format&FormatID != 0 {
		n++
	}
	if r.Format&FormatLost != 0 {
		n++
	}
	return n
}

func (r ReadValues) times() int {
	return bits.OnesCount64(uint64(r.Format & (FormatTotalTimeEnabled | FormatTotalTimeRunning)))
}

// TimeEnabled returns the time the event was enabled, if the format has
// it.
func (r ReadValues) TimeEnabled() (uint64, bool) {
	if r.Format&FormatTotalTimeEnabled == 0 || r.Len() == 0 {
		return 0, false
	}
	return r.At(1), true // after the value, or the group's count
}

// TimeRunning returns the time the event was running, if the format has
// it.
func (r ReadValues) TimeRunning() (uint64, bool) {
	if r.Format&FormatTotalTimeRunning == 0 || r.Len() == 0 {
		return 0, false
	}
	i := 1
	if r.Format&FormatTotalTimeEnabled != 0 {
		i++
	}
	return r.At(i), true
}

// Len returns the number of counters: the group's size, or 1.
func (r ReadValues) Len() int {
	if r.Words.Len() == 0 {
		return 0
	}
	if r.Format&FormatGroup != 0 {
		return int(r.At(0))
	}
	return 1
}

// Counter returns counter i.
func (r ReadValues) Counter(i int) Counter {
	var c Counter
	at := 1 + r.times() + i*r.perCounter()
	if r.Format&FormatGroup == 0 {
		c.Value = r.At(0)
		at = 1 + r.times()
	} else {
		c.Value = r.At(at)
		at++
	}
	if r.Format&FormatID != 0 {
		c.ID = r.At(at)
		at++
	}
	if r.Format&FormatLost != 0 {
		c.Lost = r.At(at)
	}
	return c
}

// readSize returns the bytes of ReadValues starting at b, or an error.
func readSize(f ReadFormat, b []byte, o binary.ByteOrder) (int, error) {
	r := ReadValues{Format: f}
	if f&FormatGroup == 0 {
		return 8 * (1 + r.times() + r.perCounter() - 1), nil
	}
	if len(b) < 8 {
		return 0, fmt.Errorf("read group count past the end")
	}
	nr := o.Uint64(b)
	per := uint64(r.perCounter())
	max := uint64(len(b)) / 8
	if nr > max/per {
		return 0, fmt.Errorf("read group of %d counters in %d bytes", nr, len(b))
	}
	return int(8 * (1 + uint64(r.times()) + nr*per)), nil
}

// Sample is a decoded SAMPLE record. Type says which fields the event
// records; the others are zero. Slices and views share the record's bytes.
type Sample struct {
	Type SampleType

	Identifier uint64 // SampleIdentifier
	IP         uint64 // SampleIP
	Pid, Tid   uint32 // SampleTID
	Time       uint64 // SampleTime
	Addr       uint64 // SampleAddr
	ID         uint64 // SampleID
	StreamID   uint64 // SampleStreamID
	CPU, Res   uint32 // SampleCPU
	Period     uint64 // SamplePeriod, or the event's fixed period

	Read ReadValues // SampleRead

	// Callchain are the addresses of SampleCallchain, with context
	// markers (ContextKernel, ContextUser, ...) between the parts.
	Callchain Words

	RawData []byte // SampleRaw

	// Branches and BranchHWIndex are SampleBranchStack; the index is set
	// when the event's branch_sample_type asks for it (HasHWIndex).
	Branches      Branches
	BranchHWIndex uint64
	HasHWIndex    bool

	RegsUser Regs // SampleRegsUser

	// StackUser is the copy of the user stack from the stack pointer up
	// (SampleStackUser): the bytes the kernel filled (dyn_size), of
	// StackUserSize reserved.
	StackUser     []byte
	StackUserSize uint64

	// Weight is SampleWeight, or with SampleWeightStruct the whole word of
	// which WeightVar1, WeightVar2 and WeightVar3 are the parts.
	Weight       uint64
	DataSrc      uint64 // SampleDataSrc
	Transaction  uint64 // SampleTransaction
	RegsIntr     Regs   // SampleRegsIntr
	PhysAddr     uint64 // SamplePhysAddr
	Cgroup       uint64 // SampleCgroup
	DataPageSize uint64 // SampleDataPageSize
	CodePageSize uint64 // SampleCodePageSize
	Aux          []byte // SampleAux
}

// WeightVar1 returns the first part of a SampleWeightStruct weight (the
// 32-bit var1_dw; on x86 the memory-access latency).
func (s *Sample) WeightVar1() uint32 { return uint32(s.Weight) }

// WeightVar2 returns the second, 16-bit part (var2_w; on x86 the
// instruction latency).
func (s *Sample) WeightVar2() uint16 { return uint16(s.Weight >> 32) }

// WeightVar3 returns the third, 16-bit part (var3_w).
func (s *Sample) WeightVar3() uint16 { return uint16(s.Weight >> 48) }

// branchHWIndex is PERF_SAMPLE_BRANCH_HW_INDEX of branch_sample_type.
const branchHWIndex = 1 << 17

// decodeSample decodes the body of a SAMPLE record (b without the 8-byte
// header) for event a, in byte order o, which e is. It returns the
// offset in b where decoding failed with a message, or -1.
func decodeSample(s *Sample, b []byte, a *Attr, o binary.ByteOrder, e byteorder.Order) (int, string) {
	*s = Sample{Type: a.SampleType}
	t := a.SampleType
	if t&SamplePeriod == 0 && a.Flags&AttrFreq == 0 {
		s.Period = a.SamplePeriod // a fixed period is not recorded per sample
	}
	if t&^sampleKnown != 0 {
		return 0, fmt.Sprintf("sample_type has unknown bits %#x", uint64(t&^sampleKnown))
	}
	p := 0
	ok := true
	field := func(bit SampleType, dst *uint64) {
		if ok && t&bit != 0 {
			*dst, p, ok = u64At(b, p, e)
		}
	}
	pair := func(x, y *uint32) {
		if ok {
			if ok = len(b)-p >= 8; ok {
				*x, *y = e.Uint32(b[p:]), e.Uint32(b[p+4:])
				p += 8
			}
		}
	}
	field(SampleIdentifier, &s.Identifier)
	field(SampleIP, &s.IP)
	if t&SampleTID != 0 {
		pair(&s.Pid, &s.Tid)
	}
	field(SampleTime, &s.Time)
	field(SampleAddr, &s.Addr)
	field(SampleID, &s.ID)
	field(SampleStreamID, &s.StreamID)
	if t&SampleCPU != 0 {
		pair(&s.CPU, &s.Res)
	}
	field(SamplePeriod, &s.Period)
	if !ok {
		return truncated(p, "fixed fields")
	}
	p, msg := decodeSampleLists(s, b, p, a, o, e)
	if msg != "" {
		return p, msg
	}
	return decodeSampleTail(s, b, p, a, o, e)
}

// u64At returns the u64 at b[p:] and the offset after it; false past
// the end of b.
func u64At(b []byte, p int, e byteorder.Order) (uint64, int, bool) {
	if len(b)-p < 8 {
		return 0, p, false
	}
	return e.Uint64(b[p:]), p + 8, true
}

// spanAt returns the n bytes at b[p:] and the offset after them; false
// past the end of b.
func spanAt(b []byte, p int, n uint64) ([]byte, int, bool) {
	if n > uint64(len(b)-p) {
		return nil, p, false
	}
	return b[p : p+int(n)], p + int(n), true
}

// truncated is decodeSample's result for a field what past the end of
// the record at offset p.
func truncated(p int, what string) (int, string) {
	return p, what + " past the end of the record"
}

// decodeSampleLists decodes the variable-length fields after the fixed
// ones of a sample, at b[p:]: read values, callchain, raw data, branch
// stack. It returns the offset after them, or decodeSample's error.
func decodeSampleLists(s *Sample, b []byte, p int, a *Attr, o binary.ByteOrder, e byteorder.Order) (int, string) {
	t := a.SampleType
	var ok bool
	if t&SampleRead != 0 {
		n, err := readSize(a.ReadFormat, b[p:], o)
		if err != nil {
			return p, err.Error()
		}
		var w []byte
		if w, p, ok = spanAt(b, p, uint64(n)); !ok {
			return truncated(p, "read values")
		}
		s.Read = ReadValues{Format: a.ReadFormat, Words: Words{w, o}}
	}
	if t&SampleCallchain != 0 {
		var nr uint64
		nr, p, ok = u64At(b, p, e)
		if !ok || nr > uint64(len(b)-p)/8 {
			return truncated(p, fmt.Sprintf("callchain of %d entries", nr))
		}
		s.Callchain = Words{b[p : p+int(nr*8)], o}
		p += int(nr * 8)
	}
	if t&SampleRaw != 0 {
		if len(b)-p < 4 {
			return truncated(p, "raw size")
		}
		n := e.Uint32(b[p:])
		p += 4
		if s.RawData, p, ok = spanAt(b, p, uint64(n)); !ok {
			return truncated(p, fmt.Sprintf("raw data of %d bytes", n))
		}
	}
	if t&SampleBranchStack != 0 {
		var nr uint64
		if nr, p, ok = u64At(b, p, e); !ok {
			return truncated(p, "branch stack")
		}
		if a.BranchSampleType&branchHWIndex != 0 {
			if s.BranchHWIndex, p, ok = u64At(b, p, e); !ok {
				return truncated(p, "branch hw_idx")
			}
			s.HasHWIndex = true
		}
		if nr > uint64(len(b)-p)/24 {
			return truncated(p, fmt.Sprintf("branch stack of %d entries", nr))
		}
		s.Branches = Branches{Words{b[p : p+int(nr*24)], o}}
		p += int(nr * 24)
	}
	return p, ""
}

// decodeSampleTail decodes the fields of a sample after its branch stack,
// at b[p:]: registers, the user stack, weight and what follows. It
// returns decodeSample's result.
func decodeSampleTail(s *Sample, b []byte, p int, a *Attr, o binary.ByteOrder, e byteorder.Order) (int, string) {
	t := a.SampleType
	ok := true
	regs := func(mask uint64, dst *Regs) bool {
		var abi uint64
		if abi, p, ok = u64At(b, p, e); !ok {
			return false
		}
		*dst = Regs{ABI: abi, Mask: mask, Words: Words{o: o}}
		if abi == RegsABINone {
			return true
		}
		dst.b, p, ok = spanAt(b, p, 8*uint64(bits.OnesCount64(mask)))
		return ok
	}
	field := func(bit SampleType, dst *uint64) {
		if ok && t&bit != 0 {
			*dst, p, ok = u64At(b, p, e)
		}
	}
	if t&SampleRegsUser != 0 && !regs(a.SampleRegsUser, &s.RegsUser) {
		return truncated(p, "user registers")
	}
	if t&SampleStackUser != 0 {
		var size uint64
		if size, p, ok = u64At(b, p, e); !ok {
			return truncated(p, "user stack size")
		}
		s.StackUserSize = size
		if size != 0 {
			var data []byte
			if data, p, ok = spanAt(b, p, size); !ok {
				return truncated(p, fmt.Sprintf("user stack of %d bytes", size))
			}
			var dyn uint64
			if dyn, p, ok = u64At(b, p, e); !ok {
				return truncated(p, "user stack dyn_size")
			}
			if dyn > size {
				return p - 8, fmt.Sprintf("user stack dyn_size %d exceeds its size %d", dyn, size)
			}
			s.StackUser = data[:dyn]
		}
	}
	if t&(SampleWeight|SampleWeightStruct) != 0 {
		if s.Weight, p, ok = u64At(b, p, e); !ok {
			return truncated(p, "weight")
		}
	}
	field(SampleDataSrc, &s.DataSrc)
	field(SampleTransaction, &s.Transaction)
	if !ok {
		return truncated(p, "data_src/transaction")
	}
	if t&SampleRegsIntr != 0 && !regs(a.SampleRegsIntr, &s.RegsIntr) {
		return truncated(p, "interrupt registers")
	}
	field(SamplePhysAddr, &s.PhysAddr)
	field(SampleCgroup, &s.Cgroup)
	field(SampleDataPageSize, &s.DataPageSize)
	field(SampleCodePageSize, &s.CodePageSize)
	if !ok {
		return truncated(p, "phys_addr/cgroup/page sizes")
	}
	if t&SampleAux != 0 {
		var n uint64
		if n, p, ok = u64At(b, p, e); !ok {
			return truncated(p, "aux size")
		}
		if s.Aux, p, ok = spanAt(b, p, n); !ok {
			return truncated(p, fmt.Sprintf("aux data of %d bytes", n))
		}
	}
	return -1, ""
}

func trailingZeros(m uint64) int { return bits.TrailingZeros64(m) }
