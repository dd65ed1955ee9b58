package perfdata

import (
	"encoding/binary"
	"math/bits"
	"strconv"
)

// Sizes of perf_event_attr as it grew (PERF_ATTR_SIZE_VER*). Fields past
// an attribute's Size read as zero.
const (
	AttrSizeVer0 = 64
	AttrSizeVer1 = 72
	AttrSizeVer2 = 80
	AttrSizeVer3 = 96
	AttrSizeVer4 = 104
	AttrSizeVer5 = 112
	AttrSizeVer6 = 120
	AttrSizeVer7 = 128
	AttrSizeVer8 = 136

	// maxAttrSize bounds the size an attribute may claim: 4 KB, far above
	// any kernel's struct, so that a bad size fails here and not by
	// reading past the section.
	maxAttrSize = 4096
)

// Attr is one event of the recording: its perf_event_attr, the sample IDs
// that name it in records, and its name when the file has one. Attrs are
// shared by every record of the event and must not be modified.
type Attr struct {
	Type             EventType
	Size             uint32 // size of the attribute in the file
	Config           uint64
	SamplePeriod     uint64 // the sample frequency when Flags has AttrFreq
	SampleType       SampleType
	ReadFormat       ReadFormat
	Flags            AttrFlags
	WakeupEvents     uint32 // or the wakeup watermark
	BPType           uint32
	Config1          uint64 // or bp_addr, kprobe_func, uprobe_path
	Config2          uint64 // or bp_len, kprobe_addr, probe_offset
	BranchSampleType uint64
	SampleRegsUser   uint64 // mask of perf register numbers in REGS_USER
	SampleStackUser  uint32 // bytes of user stack requested per sample
	ClockID          int32
	SampleRegsIntr   uint64 // mask of perf register numbers in REGS_INTR
	AuxWatermark     uint32
	SampleMaxStack   uint16
	AuxSampleSize    uint32
	SigData          uint64
	Config3          uint64

	// IDs are the sample IDs of the event's instances (one per CPU or
	// thread); records carry one of them when the recording has several
	// events.
	IDs []uint64
	// Name is the event's name from the EVENT_DESC feature (or a pipe's
	// EVENT_UPDATE), such as "cpu-clock:ppp"; empty when the file has none.
	Name string
	// Index is the event's position among the recording's attributes.
	Index int

	idPos       int // word index of the ID in a SAMPLE body, -1 if none
	isPos       int // word index from the end of the ID in a sample_id trailer, -1 if none
	trailerSize int // bytes of the sample_id trailer when sample_id_all
}

// Label names the event as perf script does (Name), or "eventN" (its
// Index) without a name in the recording: the one name of an event in
// the messages of sframe report and the sample types of its profiles.
// It is the recording's text, to be quoted for printing.
func (a *Attr) Label() string {
	if a.Name != "" {
		return a.Name
	}
	return "event" + strconv.Itoa(a.Index)
}

// SampleIDAll reports whether records other than samples carry the
// sample_id trailer (pid/tid, time, id, stream id, cpu as SampleType says).
func (a *Attr) SampleIDAll() bool { return a.Flags&AttrSampleIDAll != 0 }

// ParseAttr decodes a perf_event_attr held in b in byte order o: the
// struct as a perf.data file stores it, or as a live profiler gives it to
// perf_event_open. Its size field says how much of b it occupies (0
// means AttrSizeVer0); it must be a multiple of 8, at most 4 KiB and
// within b. The attribute has no IDs, name or index: a caller that
// decodes records of several events sets IDs (and may set Name and Index)
// before giving it to NewDecoder. Errors are *Error values whose Off is
// the offset within b.
func ParseAttr(b []byte, o binary.ByteOrder) (*Attr, error) {
	return parseAttr(b, o, 0)
}

// parseAttr decodes a perf_event_attr from b, whose length is the size the
// attribute occupies. off is b's offset in the input, for errors.
func parseAttr(b []byte, o binary.ByteOrder, off int64) (*Attr, error) {
	if len(b) < AttrSizeVer0 {
		return nil, errorf(ErrTruncated, off, "event attribute of %d bytes, need at least %d", len(b), AttrSizeVer0)
	}
	size := o.Uint32(b[4:])
	if size == 0 {
		size = AttrSizeVer0
	}
	if size < AttrSizeVer0 || size > maxAttrSize || size%8 != 0 {
		return nil, errorf(ErrBadAttr, off, "attribute size %d", size)
	}
	if int(size) > len(b) {
		return nil, errorf(ErrTruncated, off, "attribute size %d, only %d bytes", size, len(b))
	}
	b = b[:size]
	u32 := func(at int) uint32 {
		if at+4 > len(b) {
			return 0
		}
		return o.Uint32(b[at:])
	}
	u64 := func(at int) uint64 {
		if at+8 > len(b) {
			return 0
		}
		return o.Uint64(b[at:])
	}
	a := &Attr{
		Type:             EventType(u32(0)),
		Size:             size,
		Config:           u64(8),
		SamplePeriod:     u64(16),
		SampleType:       SampleType(u64(24)),
		ReadFormat:       ReadFormat(u64(32)),
		WakeupEvents:     u32(48),
		BPType:           u32(52),
		Config1:          u64(56),
		Config2:          u64(64),
		BranchSampleType: u64(72),
		SampleRegsUser:   u64(80),
		SampleStackUser:  u32(88),
		ClockID:          int32(u32(92)),
		SampleRegsIntr:   u64(96),
		AuxWatermark:     u32(104),
		AuxSampleSize:    u32(112),
		SigData:          u64(120),
		Config3:          u64(128),
	}
	if len(b) >= 110 {
		a.SampleMaxStack = o.Uint16(b[108:])
	}
	// The flags are C bit-fields: allocated from the least significant bit
	// on little-endian machines and from the most significant on big-endian
	// ones, so a big-endian word is read bit-reversed. (Big-endian by what
	// o does: binary.NativeEndian is not binary.BigEndian on any machine.)
	fl := o.Uint64(b[40:])
	if o.Uint16(bigEndianProbe[:]) == 1 {
		fl = bits.Reverse64(fl)
	}
	a.Flags = AttrFlags(fl)
	a.derive()
	return a, nil
}

// bigEndianProbe reads as 1 in big-endian byte order.
var bigEndianProbe = [2]byte{0, 1}

// derive computes the positions of the sample ID, as perf does to find
// the event of a record before decoding it.
func (a *Attr) derive() {
	t := a.SampleType
	a.idPos, a.isPos = -1, -1
	switch {
	case t&SampleIdentifier != 0:
		a.idPos = 0
		a.isPos = 1
	case t&SampleID != 0:
		a.idPos = bits.OnesCount64(uint64(t & (SampleIP | SampleTID | SampleTime | SampleAddr)))
		a.isPos = 1 + bits.OnesCount64(uint64(t&(SampleCPU|SampleStreamID)))
	}
	a.trailerSize = 8 * bits.OnesCount64(uint64(t&(SampleTID|SampleTime|SampleID|SampleStreamID|SampleCPU|SampleIdentifier)))
}
