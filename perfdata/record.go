package perfdata

import (
	"encoding/binary"
	"fmt"

	"github.com/sframekit/sframekit/internal/byteorder"
)

// recordHeaderSize is the size of struct perf_event_header.
const recordHeaderSize = 8

// Identity is the identity of a record: from a SAMPLE's own fields, or
// from the sample_id trailer of other kernel records when the event has
// sample_id_all. Present says which fields are set (the TID, TIME, ID,
// STREAM_ID, CPU and IDENTIFIER bits; ID is set from either of the last).
type Identity struct {
	Present  SampleType
	Pid, Tid uint32
	Time     uint64
	ID       uint64
	StreamID uint64
	CPU      uint32
}

// Mmap is an MMAP or MMAP2 record: a mapping of a file (or anonymous
// memory, or a special area such as [vdso]) into a process.
type Mmap struct {
	Pid, Tid uint32
	Addr     uint64
	Len      uint64
	Pgoff    uint64
	// MMAP2 only: device and inode, unless HasBuildID, in which case the
	// record carries the file's build ID instead.
	Maj, Min      uint32
	Ino, InoGen   uint64
	HasBuildID    bool
	BuildID       []byte
	Prot, Flags   uint32
	Filename      []byte // without its terminating NUL
	IsMmap2       bool
	Executable    bool // not MiscMmapData
	FilenameBytes int  // bytes the file name field occupies, padding included
}

// Comm is a COMM record: a thread's name, changed by prctl or by exec
// (Exec, from MiscCommExec).
type Comm struct {
	Pid, Tid uint32
	Comm     []byte
	Exec     bool
}

// Task is a FORK or EXIT record.
type Task struct {
	Pid, Ppid uint32
	Tid, Ptid uint32
	Time      uint64
}

// Lost is a LOST record (ID and Lost) or a LOST_SAMPLES record (Lost).
type Lost struct {
	ID   uint64
	Lost uint64
}

// Throttle is a THROTTLE or UNTHROTTLE record.
type Throttle struct {
	Time, ID, StreamID uint64
}

// Switch is a SWITCH or SWITCH_CPU_WIDE record; NextPrevPid and
// NextPrevTid (CPU-wide only) are the thread switched to (on a switch
// out) or from (on a switch in).
type Switch struct {
	Out, Preempt             bool
	NextPrevPid, NextPrevTid uint32
}

// Ksymbol is a KSYMBOL record: a kernel symbol (BPF program, trampoline)
// registered or unregistered.
type Ksymbol struct {
	Addr       uint64
	Len        uint32
	KsymType   uint16
	Flags      uint16
	Name       []byte
	Unregister bool
}

// Aux is an AUX record: new data in the AUX area.
type Aux struct {
	AuxOffset, AuxSize, Flags uint64
}

// Cgroup is a CGROUP record: a cgroup ID and its path.
type Cgroup struct {
	ID   uint64
	Path []byte
}

// Record is one record of a recording, as Reader.Next returns it: valid
// until the next call to Next, its slices pointing into the Reader's
// buffers (or the mapped file). Decoder.Decode fills a caller's Record
// the same way from a record's bytes, such as those of a live ring
// buffer. The typed accessors return nil when the
// record is of another type (or its event is unknown, for Sample).
type Record struct {
	Type RecordType
	Misc Misc
	// Offset is the record's byte offset in the input; for a record from
	// compressed data, that of the COMPRESSED record that completed it.
	Offset int64
	// DecompOffset is the record's offset in the decompressed stream, or
	// -1 for a record that was not compressed.
	DecompOffset int64
	// Raw is the whole record, header included.
	Raw []byte
	// Attr is the event the record belongs to: found by the record's
	// sample ID when the recording has several events, nil when the ID
	// names no event (perf skips such records) and for perf's own records.
	Attr *Attr
	// ID is the record's identity (see Identity).
	ID Identity
	// PayloadSize is the size of the data that follows HEADER_TRACING_DATA
	// and AUXTRACE records outside the record itself; the Reader skips it.
	PayloadSize uint64

	o        binary.ByteOrder
	e        byteorder.Order // what o is
	sample   Sample
	mmap     Mmap
	comm     Comm
	task     Task
	lost     Lost
	throttle Throttle
	sw       Switch
	ksym     Ksymbol
	aux      Aux
	cgroup   Cgroup
	decoded  bool
}

// Time returns the record's timestamp, or 0 when it has none.
func (r *Record) Time() uint64 {
	if r.ID.Present&SampleTime != 0 {
		return r.ID.Time
	}
	return 0
}

// Body returns the record's bytes after its header, trailer included.
func (r *Record) Body() []byte { return r.Raw[recordHeaderSize:] }

// Sample returns the decoded SAMPLE, or nil.
func (r *Record) Sample() *Sample { return when(r.Type == RecordSample && r.decoded, &r.sample) }

// Mmap returns the decoded MMAP or MMAP2, or nil.
func (r *Record) Mmap() *Mmap { return when(r.Type == RecordMmap || r.Type == RecordMmap2, &r.mmap) }

// Comm returns the decoded COMM, or nil.
func (r *Record) Comm() *Comm { return when(r.Type == RecordComm, &r.comm) }

// Task returns the decoded FORK or EXIT, or nil.
func (r *Record) Task() *Task { return when(r.Type == RecordFork || r.Type == RecordExit, &r.task) }

// Lost returns the decoded LOST or LOST_SAMPLES, or nil.
func (r *Record) Lost() *Lost {
	return when(r.Type == RecordLost || r.Type == RecordLostSamples, &r.lost)
}

// Throttle returns the decoded THROTTLE or UNTHROTTLE, or nil.
func (r *Record) Throttle() *Throttle {
	return when(r.Type == RecordThrottle || r.Type == RecordUnthrottle, &r.throttle)
}

// Switch returns the decoded SWITCH or SWITCH_CPU_WIDE, or nil.
func (r *Record) Switch() *Switch {
	return when(r.Type == RecordSwitch || r.Type == RecordSwitchCPUWide, &r.sw)
}

// Ksymbol returns the decoded KSYMBOL, or nil.
func (r *Record) Ksymbol() *Ksymbol { return when(r.Type == RecordKsymbol, &r.ksym) }

// Aux returns the decoded AUX, or nil.
func (r *Record) Aux() *Aux { return when(r.Type == RecordAux, &r.aux) }

// Cgroup returns the decoded CGROUP, or nil.
func (r *Record) Cgroup() *Cgroup { return when(r.Type == RecordCgroup, &r.cgroup) }

// when returns v when the record is of the accessor's type (ok), else
// nil: the one rule of the typed accessors.
func when[T any](ok bool, v *T) *T {
	if ok {
		return v
	}
	return nil
}

// decodeTrailer reads the sample_id trailer of a non-sample kernel record
// from the end of body and returns the body without it.
func decodeTrailer(id *Identity, body []byte, a *Attr, o binary.ByteOrder) ([]byte, bool) {
	if a == nil || !a.SampleIDAll() {
		return body, true
	}
	if len(body) < a.trailerSize {
		return nil, false
	}
	t := a.SampleType
	b := body[len(body)-a.trailerSize:]
	p := 0
	next := func() uint64 { v := o.Uint64(b[p:]); p += 8; return v }
	if t&SampleTID != 0 {
		id.Pid, id.Tid = o.Uint32(b[p:]), o.Uint32(b[p+4:])
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
		id.CPU = o.Uint32(b[p:])
		p += 8
	}
	if t&SampleIdentifier != 0 {
		id.ID = next()
	}
	id.Present = t & (SampleTID | SampleTime | SampleID | SampleStreamID | SampleCPU | SampleIdentifier)
	return body[:len(body)-a.trailerSize], true
}

// decodeBody decodes the typed part of r (already holding Type, Misc, Raw
// and Attr). It returns the failing offset within the record and a
// message, or -1.
func (r *Record) decodeBody() (int, string) {
	r.ID = Identity{}
	r.decoded = false
	if r.Type == RecordSample {
		return r.decodeSampleBody()
	}
	if r.Type >= RecordUserTypeStart {
		return -1, ""
	}
	return r.decodeKernelBody()
}

// decodeSampleBody decodes a SAMPLE (apart from the other kernel records,
// whose decoding needs a large stack frame).
func (r *Record) decodeSampleBody() (int, string) {
	if r.Attr == nil {
		return -1, ""
	}
	s := &r.sample
	at, msg := decodeSample(s, r.Raw[recordHeaderSize:], r.Attr, r.o, r.e)
	if at >= 0 {
		return recordHeaderSize + at, msg
	}
	r.ID = Identity{Present: s.Type & (SampleTID | SampleTime | SampleID | SampleStreamID | SampleCPU | SampleIdentifier),
		Pid: s.Pid, Tid: s.Tid, Time: s.Time, ID: s.ID, StreamID: s.StreamID, CPU: s.CPU}
	if s.Type&SampleIdentifier != 0 {
		r.ID.ID = s.Identifier
	}
	r.decoded = true
	return -1, ""
}

// decodeKernelBody decodes a kernel record other than SAMPLE.
func (r *Record) decodeKernelBody() (int, string) {
	o := r.o
	body := r.Raw[recordHeaderSize:]
	b, ok := decodeTrailer(&r.ID, body, r.Attr, o)
	if !ok {
		return recordHeaderSize, fmt.Sprintf("%d-byte body shorter than its %d-byte sample_id trailer", len(body), r.Attr.trailerSize)
	}
	need := func(n int) (int, string) {
		return recordHeaderSize, fmt.Sprintf("%s body of %d bytes (without trailer), need %d", r.Type, len(b), n)
	}
	u32 := func(at int) uint32 { return o.Uint32(b[at:]) }
	u64 := func(at int) uint64 { return o.Uint64(b[at:]) }
	switch r.Type {
	case RecordMmap:
		if len(b) < 32 {
			return need(32)
		}
		r.mmap = Mmap{Pid: u32(0), Tid: u32(4), Addr: u64(8), Len: u64(16), Pgoff: u64(24),
			Filename: cbytes(b[32:]), FilenameBytes: len(b) - 32, Executable: r.Misc&MiscMmapData == 0}
	case RecordMmap2:
		if len(b) < 64 {
			return need(64)
		}
		m := Mmap{Pid: u32(0), Tid: u32(4), Addr: u64(8), Len: u64(16), Pgoff: u64(24),
			Prot: u32(56), Flags: u32(60), Filename: cbytes(b[64:]), FilenameBytes: len(b) - 64,
			IsMmap2: true, Executable: r.Misc&MiscMmapData == 0}
		if r.Misc&MiscMmapBuildID != 0 {
			n := int(b[32])
			if n > 20 {
				return recordHeaderSize + 32, fmt.Sprintf("MMAP2 build-ID size %d", n)
			}
			m.HasBuildID = true
			m.BuildID = b[36 : 36+n]
		} else {
			m.Maj, m.Min, m.Ino, m.InoGen = u32(32), u32(36), u64(40), u64(48)
		}
		r.mmap = m
	case RecordComm:
		if len(b) < 8 {
			return need(8)
		}
		r.comm = Comm{Pid: u32(0), Tid: u32(4), Comm: cbytes(b[8:]), Exec: r.Misc&MiscCommExec != 0}
	case RecordFork, RecordExit:
		if len(b) < 24 {
			return need(24)
		}
		r.task = Task{Pid: u32(0), Ppid: u32(4), Tid: u32(8), Ptid: u32(12), Time: u64(16)}
	case RecordLost:
		if len(b) < 16 {
			return need(16)
		}
		r.lost = Lost{ID: u64(0), Lost: u64(8)}
	case RecordLostSamples:
		if len(b) < 8 {
			return need(8)
		}
		r.lost = Lost{Lost: u64(0)}
	case RecordThrottle, RecordUnthrottle:
		if len(b) < 24 {
			return need(24)
		}
		r.throttle = Throttle{Time: u64(0), ID: u64(8), StreamID: u64(16)}
	case RecordSwitch:
		r.sw = Switch{Out: r.Misc&MiscSwitchOut != 0, Preempt: r.Misc&MiscSwitchOutPreempt != 0}
	case RecordSwitchCPUWide:
		if len(b) < 8 {
			return need(8)
		}
		r.sw = Switch{Out: r.Misc&MiscSwitchOut != 0, Preempt: r.Misc&MiscSwitchOutPreempt != 0,
			NextPrevPid: u32(0), NextPrevTid: u32(4)}
	case RecordKsymbol:
		if len(b) < 16 {
			return need(16)
		}
		fl := o.Uint16(b[14:])
		r.ksym = Ksymbol{Addr: u64(0), Len: u32(8), KsymType: o.Uint16(b[12:]), Flags: fl,
			Name: cbytes(b[16:]), Unregister: fl&1 != 0}
	case RecordAux:
		if len(b) < 24 {
			return need(24)
		}
		r.aux = Aux{AuxOffset: u64(0), AuxSize: u64(8), Flags: u64(16)}
	case RecordCgroup:
		if len(b) < 8 {
			return need(8)
		}
		r.cgroup = Cgroup{ID: u64(0), Path: cbytes(b[8:])}
	}
	return -1, ""
}

// cbytes returns b up to its first NUL.
func cbytes(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
