package perfevent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// headerSize is the size of struct perf_event_header.
const headerSize = 8

// ne is the byte order of ring buffers: the machine's own.
var ne = binary.NativeEndian

// Record is one record of a ring buffer, as Session.Run hands it out.
//
// Raw is a view into the mapped ring, not a copy: it is valid only until
// the callback that received it returns, after which the kernel may
// overwrite it. Only a record that wraps around the end of the ring is
// copied, into a scratch buffer of the ring (Wrapped).
type Record struct {
	Type RecordType
	Misc Misc
	// Raw is the whole record, its 8-byte header included, in this
	// machine's byte order.
	Raw []byte
	// Attr is the event the record belongs to; nil when the session has
	// several events and the record does not say which (a record other
	// than SAMPLE or LOST without SampleIDAll).
	Attr *Attr
	// CPU is the CPU whose ring held the record.
	CPU int
	// Wrapped says Raw is a copy, the record having wrapped around the end
	// of the ring.
	Wrapped bool
}

// Body returns the record's bytes after its header.
func (r *Record) Body() []byte { return r.Raw[headerSize:] }

// ErrShort reports a record too short for its type or attribute.
var ErrShort = errors.New("perfevent: record shorter than its fields")

func short(r *Record, what string) error {
	return fmt.Errorf("%w: %s of %d bytes: %s", ErrShort, r.Type, len(r.Raw), what)
}

// Words is a view of consecutive 64-bit words of a record.
type Words []byte

// Len returns the number of words.
func (w Words) Len() int { return len(w) / 8 }

// At returns word i; it panics if i is out of range, as a slice would.
func (w Words) At(i int) uint64 { return ne.Uint64(w[8*i:]) }

// Regs is a register dump (REGS_USER): the registers whose perf numbers
// are set in Mask, lowest number first. ABI is RegsABINone when the
// sample has no user registers (a kernel thread).
type Regs struct {
	ABI  uint64
	Mask uint64
	Words
}

// Get returns the register with perf number n and whether the dump has it.
func (r Regs) Get(n int) (uint64, bool) {
	if n < 0 || n >= 64 || r.Mask&(1<<n) == 0 {
		return 0, false
	}
	i := bits.OnesCount64(r.Mask & (1<<n - 1))
	if i >= r.Len() {
		return 0, false
	}
	return r.At(i), true
}

// Sample is a decoded SAMPLE record: the fields of package perfdata's
// Sample that this package's events record. Slices share the record's
// bytes.
type Sample struct {
	Type       SampleType
	Identifier uint64 // SampleIdentifier
	IP         uint64 // SampleIP
	Pid, Tid   uint32 // SampleTID
	Time       uint64 // SampleTime
	Addr       uint64 // SampleAddr
	ID         uint64 // SampleID
	StreamID   uint64 // SampleStreamID
	CPU, Res   uint32 // SampleCPU
	Period     uint64 // SamplePeriod, or the event's fixed period
	// Callchain are the addresses of SampleCallchain, with context markers
	// (ContextKernel, ContextUser) before each part.
	Callchain Words
	RawData   []byte // SampleRaw
	RegsUser  Regs   // SampleRegsUser
	// StackUser is the copy of the user stack from the stack pointer up
	// (SampleStackUser): the bytes the kernel filled, of StackUserSize
	// reserved.
	StackUser     []byte
	StackUserSize uint64
}

// DecodeSample decodes a SAMPLE record into s. It fails on a record of
// another type, without an Attr, shorter than its fields, or of a sample
// type with fields this package does not decode (READ, BRANCH_STACK);
// fields after the user stack are not decoded.
func (r *Record) DecodeSample(s *Sample) error {
	if r.Type != RecordSample {
		return fmt.Errorf("perfevent: DecodeSample of a %s record", r.Type)
	}
	a := r.Attr
	if a == nil {
		return errors.New("perfevent: sample of an unknown event")
	}
	t := a.SampleType
	*s = Sample{Type: t}
	if t&SamplePeriod == 0 && a.Flags&AttrFreq == 0 {
		s.Period = a.SamplePeriod
	}
	if t&(SampleRead|SampleBranchStack) != 0 {
		return fmt.Errorf("perfevent: sample type %#x has fields this package does not decode", uint64(t))
	}
	b := r.Body()
	p := 0
	ok := true
	u64 := func() uint64 {
		if !ok || len(b)-p < 8 {
			ok = false
			return 0
		}
		v := ne.Uint64(b[p:])
		p += 8
		return v
	}
	// A pair of u32 (pid, tid; cpu, res) lies in memory order.
	pair := func() (uint32, uint32) {
		if !ok || len(b)-p < 8 {
			ok = false
			return 0, 0
		}
		x, y := ne.Uint32(b[p:]), ne.Uint32(b[p+4:])
		p += 8
		return x, y
	}
	field := func(bit SampleType, dst *uint64) {
		if t&bit != 0 {
			*dst = u64()
		}
	}
	field(SampleIdentifier, &s.Identifier)
	field(SampleIP, &s.IP)
	if t&SampleTID != 0 {
		s.Pid, s.Tid = pair()
	}
	field(SampleTime, &s.Time)
	field(SampleAddr, &s.Addr)
	field(SampleID, &s.ID)
	field(SampleStreamID, &s.StreamID)
	if t&SampleCPU != 0 {
		s.CPU, s.Res = pair()
	}
	field(SamplePeriod, &s.Period)
	if !ok {
		return short(r, "fixed fields")
	}
	if t&SampleCallchain != 0 {
		nr := u64()
		if !ok || nr > uint64(len(b)-p)/8 {
			return short(r, fmt.Sprintf("callchain of %d entries", nr))
		}
		s.Callchain = Words(b[p : p+int(nr)*8])
		p += int(nr) * 8
	}
	if t&SampleRaw != 0 {
		if len(b)-p < 4 {
			return short(r, "raw size")
		}
		n := ne.Uint32(b[p:])
		p += 4
		if uint64(n) > uint64(len(b)-p) {
			return short(r, fmt.Sprintf("raw data of %d bytes", n))
		}
		s.RawData = b[p : p+int(n)]
		p += int(n)
	}
	if t&SampleRegsUser != 0 {
		s.RegsUser = Regs{ABI: u64(), Mask: a.SampleRegsUser}
		if !ok {
			return short(r, "user register ABI")
		}
		if s.RegsUser.ABI != RegsABINone {
			n := 8 * bits.OnesCount64(a.SampleRegsUser)
			if n > len(b)-p {
				return short(r, "user registers")
			}
			s.RegsUser.Words = Words(b[p : p+n])
			p += n
		}
	}
	if t&SampleStackUser != 0 {
		size := u64()
		if !ok {
			return short(r, "user stack size")
		}
		s.StackUserSize = size
		if size != 0 {
			if size > uint64(len(b)-p) {
				return short(r, fmt.Sprintf("user stack of %d bytes", size))
			}
			data := b[p : p+int(size)]
			p += int(size)
			dyn := u64()
			if !ok {
				return short(r, "user stack dyn_size")
			}
			if dyn > size {
				return fmt.Errorf("perfevent: user stack dyn_size %d exceeds its size %d", dyn, size)
			}
			s.StackUser = data[:dyn]
		}
	}
	return nil
}

// Identity is the identity of a record: from a SAMPLE's own fields, or
// from the sample_id trailer of other records when the event has
// SampleIDAll. Present says which fields are set.
type Identity struct {
	Present  SampleType
	Pid, Tid uint32
	Time     uint64
	ID       uint64
	StreamID uint64
	CPU      uint32
}

// trailer splits the body of a non-sample record into its own fields and
// its identity.
func (r *Record) trailer() ([]byte, Identity, error) {
	b := r.Body()
	a := r.Attr
	if a == nil || a.trailerSize == 0 {
		return b, Identity{}, nil
	}
	if len(b) < a.trailerSize {
		return nil, Identity{}, short(r, "sample_id trailer")
	}
	tr := b[len(b)-a.trailerSize:]
	t := a.SampleType
	var id Identity
	id.Present = t & (SampleTID | SampleTime | SampleID | SampleStreamID | SampleCPU | SampleIdentifier)
	p := 0
	next := func() uint64 { v := ne.Uint64(tr[p:]); p += 8; return v }
	if t&SampleTID != 0 {
		id.Pid, id.Tid = ne.Uint32(tr[p:]), ne.Uint32(tr[p+4:])
		p += 8
	}
	if t&SampleTime != 0 {
		id.Time = next()
	}
	if t&SampleID != 0 {
		id.ID = next()
	}
	if t&SampleStreamID != 0 {
		id.StreamID = next()
	}
	if t&SampleCPU != 0 {
		id.CPU = ne.Uint32(tr[p:])
		p += 8
	}
	if t&SampleIdentifier != 0 {
		id.ID = next()
	}
	return b[:len(b)-a.trailerSize], id, nil
}

// ID returns the identity of a non-sample record from its sample_id
// trailer (zero without SampleIDAll).
func (r *Record) ID() (Identity, error) {
	_, id, err := r.trailer()
	return id, err
}

// Mmap is an MMAP or MMAP2 record: a mapping of a file (or of anonymous
// memory, or a special area such as [vdso]) into a process.
type Mmap struct {
	Pid, Tid uint32
	Addr     uint64
	Len      uint64
	Pgoff    uint64
	// MMAP2 only: device and inode, unless HasBuildID, in which case the
	// record carries the file's build ID instead.
	Maj, Min    uint32
	Ino, InoGen uint64
	HasBuildID  bool
	BuildID     []byte
	Prot, Flags uint32
	// Filename is the mapped file's path, without its terminating NUL.
	Filename   []byte
	IsMmap2    bool
	Executable bool // not MiscMmapData
}

// DecodeMmap decodes an MMAP or MMAP2 record into m.
func (r *Record) DecodeMmap(m *Mmap) error {
	if r.Type != RecordMmap && r.Type != RecordMmap2 {
		return fmt.Errorf("perfevent: DecodeMmap of a %s record", r.Type)
	}
	b, _, err := r.trailer()
	if err != nil {
		return err
	}
	u32 := func(at int) uint32 { return ne.Uint32(b[at:]) }
	u64 := func(at int) uint64 { return ne.Uint64(b[at:]) }
	if r.Type == RecordMmap {
		if len(b) < 32 {
			return short(r, "MMAP fields")
		}
		*m = Mmap{Pid: u32(0), Tid: u32(4), Addr: u64(8), Len: u64(16), Pgoff: u64(24),
			Filename: cstring(b[32:]), Executable: r.Misc&MiscMmapData == 0}
		return nil
	}
	if len(b) < 64 {
		return short(r, "MMAP2 fields")
	}
	*m = Mmap{Pid: u32(0), Tid: u32(4), Addr: u64(8), Len: u64(16), Pgoff: u64(24),
		Prot: u32(56), Flags: u32(60), Filename: cstring(b[64:]), IsMmap2: true,
		Executable: r.Misc&MiscMmapData == 0}
	if r.Misc&MiscMmapBuildID != 0 {
		n := int(b[32])
		if n > 20 {
			return fmt.Errorf("perfevent: MMAP2 build ID of %d bytes", n)
		}
		m.HasBuildID = true
		m.BuildID = b[36 : 36+n]
	} else {
		m.Maj, m.Min, m.Ino, m.InoGen = u32(32), u32(36), u64(40), u64(48)
	}
	return nil
}

// Comm is a COMM record: a thread's new name, set by prctl or by exec
// (Exec).
type Comm struct {
	Pid, Tid uint32
	Comm     []byte
	Exec     bool
}

// DecodeComm decodes a COMM record into c.
func (r *Record) DecodeComm(c *Comm) error {
	if r.Type != RecordComm {
		return fmt.Errorf("perfevent: DecodeComm of a %s record", r.Type)
	}
	b, _, err := r.trailer()
	if err != nil {
		return err
	}
	if len(b) < 8 {
		return short(r, "COMM fields")
	}
	*c = Comm{Pid: ne.Uint32(b), Tid: ne.Uint32(b[4:]), Comm: cstring(b[8:]), Exec: r.Misc&MiscCommExec != 0}
	return nil
}

// Task is a FORK or EXIT record: Pid/Tid the new (or exiting) thread,
// Ppid/Ptid its parent.
type Task struct {
	Pid, Ppid uint32
	Tid, Ptid uint32
	Time      uint64
}

// DecodeTask decodes a FORK or EXIT record into t.
func (r *Record) DecodeTask(t *Task) error {
	if r.Type != RecordFork && r.Type != RecordExit {
		return fmt.Errorf("perfevent: DecodeTask of a %s record", r.Type)
	}
	b, _, err := r.trailer()
	if err != nil {
		return err
	}
	if len(b) < 24 {
		return short(r, "FORK/EXIT fields")
	}
	*t = Task{Pid: ne.Uint32(b), Ppid: ne.Uint32(b[4:]), Tid: ne.Uint32(b[8:]), Ptid: ne.Uint32(b[12:]), Time: ne.Uint64(b[16:])}
	return nil
}

// Lost is a LOST record (the kernel dropped Lost records of the event
// with sample ID ID, the ring being full) or a LOST_SAMPLES record
// (Lost).
type Lost struct {
	ID   uint64
	Lost uint64
}

// DecodeLost decodes a LOST or LOST_SAMPLES record into l.
func (r *Record) DecodeLost(l *Lost) error {
	b, _, err := r.trailer()
	if err != nil {
		return err
	}
	switch r.Type {
	case RecordLost:
		if len(b) < 16 {
			return short(r, "LOST fields")
		}
		*l = Lost{ID: ne.Uint64(b), Lost: ne.Uint64(b[8:])}
	case RecordLostSamples:
		if len(b) < 8 {
			return short(r, "LOST_SAMPLES fields")
		}
		*l = Lost{Lost: ne.Uint64(b)}
	default:
		return fmt.Errorf("perfevent: DecodeLost of a %s record", r.Type)
	}
	return nil
}

// Switch is a SWITCH or SWITCH_CPU_WIDE record: a context switch out of
// (Out) or into the thread of its identity; for SWITCH_CPU_WIDE,
// NextPrevPid/Tid are the thread switched to (on a switch out) or from.
type Switch struct {
	Out, Preempt             bool
	NextPrevPid, NextPrevTid uint32
}

// DecodeSwitch decodes a SWITCH or SWITCH_CPU_WIDE record into s.
func (r *Record) DecodeSwitch(s *Switch) error {
	b, _, err := r.trailer()
	if err != nil {
		return err
	}
	*s = Switch{Out: r.Misc&MiscSwitchOut != 0, Preempt: r.Misc&MiscSwitchOutPreempt != 0}
	switch r.Type {
	case RecordSwitch:
	case RecordSwitchCPUWide:
		if len(b) < 8 {
			return short(r, "SWITCH_CPU_WIDE fields")
		}
		s.NextPrevPid, s.NextPrevTid = ne.Uint32(b), ne.Uint32(b[4:])
	default:
		return fmt.Errorf("perfevent: DecodeSwitch of a %s record", r.Type)
	}
	return nil
}

// cstring returns b up to its first NUL.
func cstring(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
