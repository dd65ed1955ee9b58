package perfdata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// Synthetic recordings, written here byte by byte from the layouts of
// perf_event.h, cover what perf cannot record on the test machine (branch
// stacks, AUX samples, big-endian files, LOST records, unknown types) and
// check that both byte orders decode to the same values.

type enc struct {
	o binary.ByteOrder
	b []byte
}

func (e *enc) u16(v uint16) *enc { e.b = e.o.(binary.AppendByteOrder).AppendUint16(e.b, v); return e }
func (e *enc) u32(v uint32) *enc { e.b = e.o.(binary.AppendByteOrder).AppendUint32(e.b, v); return e }
func (e *enc) u64(v uint64) *enc { e.b = e.o.(binary.AppendByteOrder).AppendUint64(e.b, v); return e }
func (e *enc) raw(v []byte) *enc { e.b = append(e.b, v...); return e }
func (e *enc) pad(n int) *enc    { e.b = append(e.b, make([]byte, n)...); return e }
func (e *enc) str(s string, n int) *enc {
	b := make([]byte, n)
	copy(b, s)
	return e.raw(b)
}

// record wraps a body in a record header.
func record1(o binary.ByteOrder, t RecordType, misc Misc, body []byte) []byte {
	e := &enc{o: o}
	e.u32(uint32(t)).u16(uint16(misc)).u16(uint16(8 + len(body))).raw(body)
	return e.b
}

// encodeAttr writes a 128-byte perf_event_attr.
func encodeAttr(o binary.ByteOrder, a *Attr) []byte {
	e := &enc{o: o}
	fl := uint64(a.Flags)
	if o == binary.BigEndian {
		fl = bits.Reverse64(fl)
	}
	e.u32(uint32(a.Type)).u32(AttrSizeVer7).u64(a.Config).u64(a.SamplePeriod).u64(uint64(a.SampleType)).
		u64(uint64(a.ReadFormat)).u64(fl).u32(a.WakeupEvents).u32(a.BPType).u64(a.Config1).u64(a.Config2).
		u64(a.BranchSampleType).u64(a.SampleRegsUser).u32(a.SampleStackUser).u32(uint32(a.ClockID)).
		u64(a.SampleRegsIntr).u32(a.AuxWatermark).u16(a.SampleMaxStack).u16(0).u32(a.AuxSampleSize).u32(0).u64(a.SigData)
	return e.b
}

// fileOf writes a file-mode recording: header, attributes with their IDs,
// the data, and the given features.
func fileOf(o binary.ByteOrder, attrs []*Attr, data []byte, feats map[Feature][]byte) []byte {
	const hdr = fileHeaderSize
	var attrSec, idSec []byte
	idBase := hdr
	idBase += len(attrs) * (AttrSizeVer7 + fileSectionSize)
	for _, a := range attrs {
		attrSec = append(attrSec, encodeAttr(o, a)...)
		e := &enc{o: o}
		e.u64(uint64(idBase + len(idSec))).u64(uint64(8 * len(a.IDs)))
		attrSec = append(attrSec, e.b...)
		for _, id := range a.IDs {
			idSec = o.(binary.AppendByteOrder).AppendUint64(idSec, id)
		}
	}
	dataOff := hdr + len(attrSec) + len(idSec)
	var fs FeatureSet
	var table, sections []byte
	secBase := dataOff + len(data)
	nf := 0
	for f := Feature(0); f < NumFeatureBits; f++ {
		if feats[f] != nil {
			fs.set(f)
			nf++
		}
	}
	secBase += nf * fileSectionSize
	for f := Feature(0); f < NumFeatureBits; f++ {
		if d := feats[f]; d != nil {
			e := &enc{o: o}
			e.u64(uint64(secBase + len(sections))).u64(uint64(len(d)))
			table = append(table, e.b...)
			sections = append(sections, d...)
		}
	}
	e := &enc{o: o}
	e.raw([]byte("PERFILE2"))
	if o == binary.BigEndian {
		e.b = e.b[:0]
		e.u64(magicLE) // the same word, written big-endian: "2ELIFREP"
	}
	e.u64(hdr).u64(AttrSizeVer7 + fileSectionSize).
		u64(hdr).u64(uint64(len(attrSec))).
		u64(uint64(dataOff)).u64(uint64(len(data))).
		u64(0).u64(0)
	for _, w := range fs {
		e.u64(w)
	}
	e.raw(attrSec).raw(idSec).raw(data).raw(table).raw(sections)
	return e.b
}

// pipeOf writes a pipe-mode recording: header, HEADER_ATTR records, data.
func pipeOf(o binary.ByteOrder, attrs []*Attr, data []byte) []byte {
	e := &enc{o: o}
	if o == binary.BigEndian {
		e.u64(magicLE)
	} else {
		e.raw([]byte("PERFILE2"))
	}
	e.u64(pipeHeaderSize)
	for _, a := range attrs {
		body := encodeAttr(o, a)
		for _, id := range a.IDs {
			body = o.(binary.AppendByteOrder).AppendUint64(body, id)
		}
		e.raw(record1(o, RecordHeaderAttr, 0, body))
	}
	e.raw(data)
	return e.b
}

func perfString(o binary.ByteOrder, s string) []byte {
	n := (len(s) + 1 + 63) &^ 63
	e := &enc{o: o}
	e.u32(uint32(n)).str(s, n)
	return e.b
}

// allSampleType is every sample_type bit but WEIGHT (WEIGHT_STRUCT takes
// its place; they share the field).
const allSampleType = SampleIP | SampleTID | SampleTime | SampleAddr | SampleRead | SampleCallchain |
	SampleID | SampleCPU | SamplePeriod | SampleStreamID | SampleRaw | SampleBranchStack |
	SampleRegsUser | SampleStackUser | SampleDataSrc | SampleIdentifier | SampleTransaction |
	SampleRegsIntr | SamplePhysAddr | SampleAux | SampleCgroup | SampleDataPageSize |
	SampleCodePageSize | SampleWeightStruct

func synthAttrs() []*Attr {
	a := &Attr{Type: TypeSoftware, SampleType: allSampleType, SamplePeriod: 1000,
		ReadFormat:       FormatTotalTimeEnabled | FormatTotalTimeRunning | FormatID | FormatLost,
		Flags:            AttrSampleIDAll | AttrDisabled | AttrMmap2 | AttrCommExec | AttrExcludeKernel | 2<<15,
		BranchSampleType: branchHWIndex | 1, SampleRegsUser: 1<<PerfRegX86SP | 1<<PerfRegX86IP | 1<<PerfRegX86BP,
		SampleRegsIntr: 1 << PerfRegX86AX, SampleStackUser: 64, IDs: []uint64{100, 101}, ClockID: -7}
	b := &Attr{Type: TypeSoftware, Config: 1, SampleType: SampleIdentifier | SampleIP | SampleTID | SampleTime | SampleCPU | SamplePeriod | SampleWeight,
		Flags: AttrSampleIDAll | AttrFreq, SamplePeriod: 4000, IDs: []uint64{200}}
	return []*Attr{a, b}
}

// synthSample writes a SAMPLE of event a (all fields), with values derived
// from k so that each sample differs.
func synthSample(o binary.ByteOrder, k uint64) []byte {
	e := &enc{o: o}
	e.u64(100)                                                // IDENTIFIER
	e.u64(0x401000 + k)                                       // IP
	e.u32(1000).u32(1001)                                     // TID
	e.u64(5000 + k)                                           // TIME
	e.u64(0xdead0000 + k)                                     // ADDR
	e.u64(100)                                                // ID
	e.u64(7)                                                  // STREAM_ID
	e.u32(3).u32(0)                                           // CPU
	e.u64(1234)                                               // PERIOD
	e.u64(11).u64(22).u64(33).u64(100).u64(4)                 // READ: value, enabled, running, id, lost
	e.u64(3).u64(ContextUser).u64(0x401000 + k).u64(0x402000) // CALLCHAIN
	e.u32(6).raw([]byte("rawraw"))                            // RAW
	e.u64(2).u64(9)                                           // BRANCH_STACK nr, hw_idx
	e.u64(0x10).u64(0x20).u64(0x30).u64(0x40).u64(0x50).u64(0x60)
	e.u64(RegsABI64).u64(0x7000).u64(0x7ff0).u64(0x401000 + k) // REGS_USER: BP, SP, IP
	e.u64(64).raw(bytes.Repeat([]byte{0xab}, 64)).u64(40)      // STACK_USER: size, data, dyn_size
	e.u64(0x0003000200000001)                                  // WEIGHT_STRUCT
	e.u64(0x42)                                                // DATA_SRC
	e.u64(0x99)                                                // TRANSACTION
	e.u64(RegsABI64).u64(0xaaaa)                               // REGS_INTR: AX
	e.u64(0x1234000)                                           // PHYS_ADDR
	e.u64(77)                                                  // CGROUP
	e.u64(4096)                                                // DATA_PAGE_SIZE
	e.u64(2 << 20)                                             // CODE_PAGE_SIZE
	e.u64(5).raw([]byte("auxxx"))                              // AUX
	return record1(o, RecordSample, MiscUser|MiscExactIP, e.b)
}

// trailer is the sample_id of event a: TID, TIME, ID, STREAM_ID, CPU,
// IDENTIFIER.
func trailer(o binary.ByteOrder, t uint64) []byte {
	e := &enc{o: o}
	e.u32(1000).u32(1002).u64(t).u64(100).u64(7).u32(3).u32(0).u64(100)
	return e.b
}

func synthData(o binary.ByteOrder) []byte { return synthDataOpt(o, true) }

// synthDataOpt writes the synthetic records, with or without a record
// followed by out-of-record data (which perf never compresses).
func synthDataOpt(o binary.ByteOrder, payload bool) []byte {
	var d []byte
	add := func(t RecordType, misc Misc, body ...[]byte) {
		d = append(d, record1(o, t, misc, bytes.Join(body, nil))...)
	}
	e := func() *enc { return &enc{o: o} }
	add(RecordComm, MiscCommExec, e().u32(1000).u32(1000).str("prog", 8).b, trailer(o, 10))
	add(RecordMmap, MiscUser, e().u32(1000).u32(1000).u64(0x400000).u64(0x1000).u64(0).str("/bin/prog", 16).b, trailer(o, 11))
	add(RecordMmap2, MiscUser, e().u32(1000).u32(1000).u64(0x401000).u64(0x2000).u64(0x1000).
		u32(8).u32(1).u64(4242).u64(5).u32(5).u32(2).str("/bin/prog", 16).b, trailer(o, 12))
	add(RecordMmap2, MiscUser|MiscMmapBuildID, e().u32(1000).u32(1000).u64(0x7f0000).u64(0x3000).u64(0).
		raw([]byte{4, 0, 0, 0}).raw([]byte{1, 2, 3, 4}).pad(16).u32(5).u32(2).str("/lib/x.so", 16).b, trailer(o, 13))
	add(RecordFork, 0, e().u32(1000).u32(999).u32(1002).u32(1000).u64(14).b, trailer(o, 14))
	d = append(d, synthSample(o, 1)...)
	add(RecordLost, 0, e().u64(100).u64(17).b, trailer(o, 15))
	add(RecordLostSamples, 0, e().u64(18).b, trailer(o, 16))
	add(RecordThrottle, 0, e().u64(17).u64(100).u64(7).b, trailer(o, 17))
	add(RecordUnthrottle, 0, e().u64(18).u64(100).u64(7).b, trailer(o, 18))
	add(RecordSwitch, MiscSwitchOut|MiscSwitchOutPreempt, trailer(o, 19))
	add(RecordSwitchCPUWide, 0, e().u32(2000).u32(2001).b, trailer(o, 20))
	add(RecordKsymbol, 0, e().u64(0xffffffffc0000000).u32(0x100).u16(1).u16(1).str("bpf_prog_x", 16).b, trailer(o, 21))
	add(RecordAux, 0, e().u64(0x1000).u64(0x200).u64(1).b, trailer(o, 22))
	add(RecordCgroup, 0, e().u64(77).str("/sys/x", 8).b, trailer(o, 23))
	add(RecordType(30), 0, e().u64(1).u64(2).b) // unknown kernel type: skipped by its size
	add(RecordType(200), 0, e().u64(3).b)       // unknown perf type
	if payload {
		// A tracing-data record, with 16 bytes of data after it.
		add(RecordTracingData, 0, e().u32(16).u32(0).b)
		d = append(d, bytes.Repeat([]byte{0xee}, 16)...)
	}
	// A sample of event b (ID 200), one with an unknown ID, one with ID 0.
	b := func(id, t uint64) []byte {
		return e().u64(id).u64(0x500000).u32(1000).u32(1003).u64(t).u32(1).u32(0).u64(4000).u64(9).b
	}
	add(RecordSample, MiscKernel, b(200, 24))
	add(RecordSample, MiscKernel, b(555, 25))
	d = append(d, synthSample(o, 2)...)
	add(RecordExit, 0, e().u32(1000).u32(999).u32(1002).u32(1000).u64(27).b, trailer(o, 27))
	return d
}

// check verifies the decoded synthetic records (from any byte order and
// format).
func checkSynth(t *testing.T, r *Reader) {
	t.Helper()
	var types []RecordType
	samples, other, unknown := 0, 0, 0
	readAll(t, r, func(rec *Record) {
		if rec.Type != RecordHeaderAttr {
			types = append(types, rec.Type)
		}
		switch rec.Type {
		case RecordSample:
			s := rec.Sample()
			switch {
			case rec.Attr == nil:
				if s != nil || rec.ID.Present != 0 {
					t.Fatal("sample of an unknown ID decoded")
				}
				unknown++
				return
			case rec.Attr.Index == 1:
				if s.Identifier != 200 && s.Identifier != 0 || s.Weight != 9 || s.Tid != 1003 || s.Period != 4000 {
					t.Fatalf("event 1 sample: %+v", s)
				}
				other++
				return
			}
			samples++
			k := uint64(samples)
			if s.Identifier != 100 || s.IP != 0x401000+k || s.Pid != 1000 || s.Tid != 1001 || s.Time != 5000+k ||
				s.Addr != 0xdead0000+k || s.ID != 100 || s.StreamID != 7 || s.CPU != 3 || s.Period != 1234 {
				t.Fatalf("fixed fields: %+v", s)
			}
			if v, _ := s.Read.TimeEnabled(); v != 22 {
				t.Fatalf("time enabled %d", v)
			}
			if v, _ := s.Read.TimeRunning(); v != 33 {
				t.Fatalf("time running %d", v)
			}
			if c := s.Read.Counter(0); s.Read.Len() != 1 || c != (Counter{Value: 11, ID: 100, Lost: 4}) {
				t.Fatalf("read: %d %+v", s.Read.Len(), c)
			}
			if s.Callchain.Len() != 3 || s.Callchain.At(0) != ContextUser || s.Callchain.At(2) != 0x402000 {
				t.Fatalf("callchain %x", s.Callchain.Bytes())
			}
			if string(s.RawData) != "rawraw" || string(s.Aux) != "auxxx" {
				t.Fatalf("raw %q aux %q", s.RawData, s.Aux)
			}
			if !s.HasHWIndex || s.BranchHWIndex != 9 || s.Branches.Len() != 2 ||
				s.Branches.At(1) != (BranchEntry{0x40, 0x50, 0x60}) {
				t.Fatalf("branches %+v", s.Branches)
			}
			if sp, ok := s.RegsUser.Get(PerfRegX86SP); !ok || sp != 0x7ff0 {
				t.Fatalf("SP %x %v", sp, ok)
			}
			if ip, _ := s.RegsUser.Get(PerfRegX86IP); ip != 0x401000+k {
				t.Fatalf("IP %x", ip)
			}
			if _, ok := s.RegsUser.Get(PerfRegX86AX); ok {
				t.Fatal("AX not in the mask, found")
			}
			if ax, _ := s.RegsIntr.Get(PerfRegX86AX); ax != 0xaaaa {
				t.Fatalf("intr AX %x", ax)
			}
			if len(s.StackUser) != 40 || s.StackUserSize != 64 || s.StackUser[39] != 0xab {
				t.Fatalf("stack %d of %d", len(s.StackUser), s.StackUserSize)
			}
			if s.WeightVar1() != 1 || s.WeightVar2() != 2 || s.WeightVar3() != 3 {
				t.Fatalf("weight %x", s.Weight)
			}
			if s.DataSrc != 0x42 || s.Transaction != 0x99 || s.PhysAddr != 0x1234000 || s.Cgroup != 77 ||
				s.DataPageSize != 4096 || s.CodePageSize != 2<<20 {
				t.Fatalf("tail fields %+v", s)
			}
			if rec.Misc&MiscExactIP == 0 || rec.Misc.CPUMode() != MiscUser {
				t.Fatalf("misc %x", rec.Misc)
			}
		case RecordComm:
			if c := rec.Comm(); string(c.Comm) != "prog" || !c.Exec || rec.Time() != 10 || rec.ID.Tid != 1002 || rec.ID.CPU != 3 {
				t.Fatalf("comm %+v id %+v", c, rec.ID)
			}
		case RecordMmap:
			if m := rec.Mmap(); string(m.Filename) != "/bin/prog" || m.Addr != 0x400000 || m.IsMmap2 {
				t.Fatalf("mmap %+v", m)
			}
		case RecordMmap2:
			m := rec.Mmap()
			if m.HasBuildID {
				if !bytes.Equal(m.BuildID, []byte{1, 2, 3, 4}) || string(m.Filename) != "/lib/x.so" {
					t.Fatalf("mmap2 build id %+v", m)
				}
			} else if m.Maj != 8 || m.Min != 1 || m.Ino != 4242 || m.InoGen != 5 || m.Prot != 5 || m.Pgoff != 0x1000 {
				t.Fatalf("mmap2 %+v", m)
			}
		case RecordFork, RecordExit:
			if k := rec.Task(); k.Pid != 1000 || k.Ppid != 999 || k.Tid != 1002 || k.Time != rec.Time() {
				t.Fatalf("task %+v", k)
			}
		case RecordLost:
			if l := rec.Lost(); l.ID != 100 || l.Lost != 17 {
				t.Fatalf("lost %+v", l)
			}
		case RecordLostSamples:
			if l := rec.Lost(); l.Lost != 18 {
				t.Fatalf("lost samples %+v", l)
			}
		case RecordThrottle, RecordUnthrottle:
			if th := rec.Throttle(); th.ID != 100 || th.StreamID != 7 || th.Time != rec.Time() {
				t.Fatalf("throttle %+v", th)
			}
		case RecordSwitch:
			if w := rec.Switch(); !w.Out || !w.Preempt {
				t.Fatalf("switch %+v", w)
			}
		case RecordSwitchCPUWide:
			if w := rec.Switch(); w.Out || w.NextPrevPid != 2000 || w.NextPrevTid != 2001 {
				t.Fatalf("switch cpu-wide %+v", w)
			}
		case RecordKsymbol:
			if k := rec.Ksymbol(); string(k.Name) != "bpf_prog_x" || k.Len != 0x100 || !k.Unregister || k.KsymType != 1 {
				t.Fatalf("ksymbol %+v", k)
			}
		case RecordAux:
			if a := rec.Aux(); a.AuxSize != 0x200 {
				t.Fatalf("aux %+v", a)
			}
		case RecordCgroup:
			if c := rec.Cgroup(); c.ID != 77 || string(c.Path) != "/sys/x" {
				t.Fatalf("cgroup %+v", c)
			}
		case RecordTracingData:
			if rec.PayloadSize != 16 {
				t.Fatalf("tracing data payload %d", rec.PayloadSize)
			}
		}
		if rec.Type < RecordUserTypeStart && rec.Type != RecordSample && rec.Type != 30 && rec.ID.ID != 100 {
			t.Fatalf("%s: trailer ID %d", rec.Type, rec.ID.ID)
		}
	})
	if samples != 2 || other != 1 || unknown != 1 {
		t.Fatalf("%d full samples, %d of event 1, %d of no event; want 2, 1, 1 (types %v)", samples, other, unknown, types)
	}
	want := []RecordType{RecordComm, RecordMmap, RecordMmap2, RecordMmap2, RecordFork, RecordSample, RecordLost,
		RecordLostSamples, RecordThrottle, RecordUnthrottle, RecordSwitch, RecordSwitchCPUWide, RecordKsymbol,
		RecordAux, RecordCgroup, 30, 200}
	if got := types[:len(want)]; !slices.Equal(got, want) && !r.ordered {
		t.Fatalf("types %v, want %v...", got, want)
	}
}

func TestSynthetic(t *testing.T) {
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		feats := map[Feature][]byte{
			FeatHostname: perfString(o, "host"),
			FeatArch:     perfString(o, "x86_64"),
			FeatNrCPUs:   (&enc{o: o}).u32(8).u32(4).b,
		}
		for _, pipe := range []bool{false, true} {
			name := o.String()
			if pipe {
				name += "/pipe"
			}
			t.Run(name, func(t *testing.T) {
				var b []byte
				if pipe {
					b = pipeOf(o, synthAttrs(), synthData(o))
				} else {
					b = fileOf(o, synthAttrs(), synthData(o), feats)
				}
				r, err := NewBytes(b)
				if err != nil {
					t.Fatal(err)
				}
				h := r.Header()
				if h.ByteOrder != o || h.Pipe != pipe {
					t.Fatalf("byte order %v pipe %v", h.ByteOrder, h.Pipe)
				}
				checkSynth(t, r)
				a := h.Attrs[0]
				if a.Flags.PreciseIP() != 2 || !a.SampleIDAll() || a.Flags&AttrExcludeKernel == 0 || a.Flags&AttrFreq != 0 || a.ClockID != -7 {
					t.Fatalf("attr flags %v clockid %d", a.Flags, a.ClockID)
				}
				if !pipe && (h.Hostname != "host" || h.Arch != "x86_64" || h.NrCPUsAvail != 8 || h.NrCPUsOnline != 4) {
					t.Fatalf("features %+v", h)
				}
				// Streamed, the pipe format decodes the same; its header
				// comes in records.
				if pipe {
					e := func() *enc { return &enc{o: o} }
					extra := record1(o, RecordHeaderFeature, 0, append(e().u64(uint64(FeatHostname)).b, perfString(o, "pipehost")...))
					extra = append(extra, record1(o, RecordHeaderBuildID, MiscUser|MiscBuildIDSize,
						e().u32(1000).raw([]byte{9, 8, 7, 6, 5, 4, 3, 2}).pad(12).raw([]byte{8, 0, 0, 0}).str("/bin/prog", 16).b)...)
					extra = append(extra, record1(o, RecordEventUpdate, 0, e().u64(2).u64(200).str("task-clock", 16).b)...)
					b = append(b[:len(b):len(b)], extra...)
					r, err := NewReader(bytes.NewReader(b))
					if err != nil {
						t.Fatal(err)
					}
					checkSynth(t, r)
					h := r.Header()
					if h.Hostname != "pipehost" || len(h.BuildIDs) != 1 || h.Attrs[1].Name != "task-clock" ||
						!bytes.Equal(h.BuildIDs[0].ID, []byte{9, 8, 7, 6, 5, 4, 3, 2}) || h.BuildIDs[0].Filename != "/bin/prog" ||
						h.BuildIDs[0].Pid != 1000 || !h.Features.Has(FeatHostname) {
						t.Fatalf("pipe header: host %q, build IDs %+v, names %q", h.Hostname, h.BuildIDs, h.Attrs[1].Name)
					}
				}
			})
		}
	}
}

// TestSyntheticCompressed splits the records of a recording across
// COMPRESSED (and COMPRESSED2) records of one zstd stream, flushed between
// records as perf does, with records cut in the middle, and checks that
// the records decode as without compression.
func TestSyntheticCompressed(t *testing.T) {
	o := binary.LittleEndian
	data := synthDataOpt(o, false)
	for _, t2 := range []RecordType{RecordCompressed, RecordCompressed2} {
		for _, chunk := range []int{7, 100, 1000, len(data)} {
			var buf bytes.Buffer
			w, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedFastest))
			if err != nil {
				t.Fatal(err)
			}
			var out []byte
			for p := 0; p < len(data); p += chunk {
				buf.Reset()
				w.Write(data[p:min(p+chunk, len(data))])
				w.Flush()
				body := buf.Bytes()
				if t2 == RecordCompressed2 {
					e := &enc{o: o}
					e.u64(uint64(len(body))).raw(body).pad((8 - len(body)%8) % 8)
					body = e.b
				}
				out = append(out, record1(o, t2, 0, body)...)
			}
			b := fileOf(o, synthAttrs(), out, nil)
			for _, ordered := range []bool{false, true} {
				r, err := NewBytes(b)
				if err != nil {
					t.Fatal(err)
				}
				r.SetTimeOrder(ordered)
				t.Logf("%s, chunks of %d bytes, time order %v", t2, chunk, ordered)
				checkSynth(t, r)
				r.Close()
			}
		}
	}
}

// TestDecompressionLimits: a zstd bomb stops at the limit, with an error.
func TestDecompressionLimits(t *testing.T) {
	o := binary.LittleEndian
	// 64 MiB of COMM records compress to almost nothing.
	one := record1(o, RecordComm, 0, (&enc{o: o}).u32(1).u32(1).str("x", 8).b)
	big := bytes.Repeat(one, (64<<20)/len(one))
	enc1, _ := zstd.NewWriter(nil)
	comp := enc1.EncodeAll(big, nil)
	var out []byte
	for p := 0; p < len(comp); p += 60000 {
		out = append(out, record1(o, RecordCompressed, 0, comp[p:min(p+60000, len(comp))])...)
	}
	a := synthAttrs()[0]
	a.Flags &^= AttrSampleIDAll // the COMM records have no sample_id
	b := fileOf(o, []*Attr{a}, out, nil)
	r, err := NewBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	r.SetLimits(Limits{MaxDecompressedRecord: 1 << 20})
	n := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			t.Fatal("no error from a 64 MiB record with a 1 MiB limit")
		}
		if err != nil {
			if KindOf(err) != ErrCompressed {
				t.Fatalf("error %v, want kind %v", err, ErrCompressed)
			}
			break
		}
		n++
	}
	r.Close()
	t.Logf("%d records before the error", n)
}

// TestEventsDisagreeOnIDPosition: several events must put the sample ID
// in the same place, or records cannot be matched; perf refuses such
// files, and so do we, with an error naming the record.
func TestEventsDisagreeOnIDPosition(t *testing.T) {
	o := binary.LittleEndian
	attrs := synthAttrs()
	attrs[1].SampleType = SampleIP | SampleID | SampleTime
	attrs[1].derive()
	b := fileOf(o, attrs, synthData(o), nil)
	r, err := NewBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Next()
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrBadAttr {
		t.Fatalf("got %v, want an error of kind %v", err, ErrBadAttr)
	}
}
