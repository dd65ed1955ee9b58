package perfevent

import (
	"bytes"
	"math/bits"
	"reflect"
	"testing"

	"github.com/sframekit/sframekit/perfdata"
)

// enc builds record bodies word by word, in this machine's byte order.
type enc struct{ b []byte }

func (e *enc) u64(v uint64) *enc { e.b = ne.AppendUint64(e.b, v); return e }
func (e *enc) u32s(x, y uint32) *enc {
	e.b = ne.AppendUint32(e.b, x)
	e.b = ne.AppendUint32(e.b, y)
	return e
}
func (e *enc) bytes(p []byte) *enc { e.b = append(e.b, p...); return e }

// buildAttrs returns the attributes of o, or fails the test.
func buildAttrs(t testing.TB, o Options) []*Attr {
	t.Helper()
	attrs, err := o.buildAttrs()
	if err != nil {
		t.Fatal(err)
	}
	return attrs
}

// decoderOf is the Decoder of a session of the events attrs.
func decoderOf(attrs ...*Attr) *perfdata.Decoder {
	var pa []*perfdata.Attr
	for _, a := range attrs {
		pa = append(pa, a.Attr)
	}
	return perfdata.NewDecoder(ne, pa)
}

// rec wraps a body into a record of type typ, of a session with decoder d.
func rec(typ perfdata.RecordType, misc perfdata.Misc, body []byte, d *perfdata.Decoder) *Record {
	raw := make([]byte, headerSize, headerSize+len(body))
	ne.PutUint32(raw, uint32(typ))
	ne.PutUint16(raw[4:], uint16(misc))
	ne.PutUint16(raw[6:], uint16(headerSize+len(body)))
	raw = append(raw, body...)
	return &Record{Type: typ, Misc: misc, Raw: raw, dec: d}
}

// testAttr is the attribute of a profiler's event: every field a
// profiler asks for.
func testAttr(t testing.TB, extra Options) *Attr {
	o := extra
	o.PIDs = []int{1}
	o.RegsUser = RegsAMD64
	o.StackUser = 64
	o.Callchain = true
	return buildAttrs(t, o)[0]
}

// sample are the fields of a test sample, to encode and to expect.
type sample struct {
	Identifier uint64
	IP         uint64
	Pid, Tid   uint32
	Time       uint64
	CPU, Res   uint32
	Period     uint64
	Callchain  []uint64
	ABI        uint64
	Regs       []uint64
	Stack      []byte
	StackSize  uint64
}

// sampleBody encodes a sample of attribute a with the fields of want.
func sampleBody(a *Attr, want *sample) []byte {
	e := &enc{}
	t := a.SampleType
	if t&perfdata.SampleIdentifier != 0 {
		e.u64(want.Identifier)
	}
	e.u64(want.IP).u32s(want.Pid, want.Tid).u64(want.Time).u32s(want.CPU, want.Res).u64(want.Period)
	if t&perfdata.SampleCallchain != 0 {
		e.u64(uint64(len(want.Callchain)))
		for _, v := range want.Callchain {
			e.u64(v)
		}
	}
	if t&perfdata.SampleRegsUser != 0 {
		e.u64(want.ABI)
		for _, v := range want.Regs {
			e.u64(v)
		}
	}
	if t&perfdata.SampleStackUser != 0 {
		e.u64(want.StackSize).bytes(want.Stack)
		e.bytes(make([]byte, int(want.StackSize)-len(want.Stack)))
		e.u64(uint64(len(want.Stack)))
	}
	return e.b
}

func testSample(a *Attr) *sample {
	regs := make([]uint64, bits.OnesCount64(a.SampleRegsUser))
	for i := range regs {
		regs[i] = 0x1000 + uint64(i)
	}
	return &sample{
		IP: 0x401234, Pid: 100, Tid: 101, Time: 123456789, CPU: 1, Period: 10101,
		Callchain: []uint64{perfdata.ContextKernel, 0xffffffff81000000, 0xffffffff81000100},
		ABI:       perfdata.RegsABI64, Regs: regs,
		Stack:     bytes.Repeat([]byte{0xab}, 40),
		StackSize: 64,
	}
}

// checkSample fails unless s, decoded, holds the fields of want.
func checkSample(t *testing.T, s *perfdata.Sample, a *Attr, want *sample) {
	t.Helper()
	var cc, regs []uint64
	for i := range s.Callchain.Len() {
		cc = append(cc, s.Callchain.At(i))
	}
	for i := range s.RegsUser.Len() {
		regs = append(regs, s.RegsUser.At(i))
	}
	got := sample{Identifier: s.Identifier, IP: s.IP, Pid: s.Pid, Tid: s.Tid, Time: s.Time, CPU: s.CPU, Res: s.Res,
		Period: s.Period, Callchain: cc, ABI: s.RegsUser.ABI, Regs: regs, Stack: s.StackUser, StackSize: s.StackUserSize}
	if !reflect.DeepEqual(&got, want) || s.Type != a.SampleType || s.RegsUser.Mask != a.SampleRegsUser {
		t.Fatalf("decoded %+v (type %v, mask %#x)\nwant %+v", got, s.Type, s.RegsUser.Mask, *want)
	}
}

func TestDecodeSample(t *testing.T) {
	a := testAttr(t, Options{})
	d := decoderOf(a)
	want := testSample(a)
	r := rec(perfdata.RecordSample, perfdata.MiscUser, sampleBody(a, want), d)
	dr, err := r.Decode()
	if err != nil {
		t.Fatal(err)
	}
	got := dr.Sample()
	if got == nil || dr.Attr != a.Attr {
		t.Fatalf("sample not decoded, or of event %p, not %p", dr.Attr, a.Attr)
	}
	checkSample(t, got, a, want)
	// The views are views of the ring's bytes.
	if &got.StackUser[0] != &r.Raw[len(r.Raw)-8-64] {
		t.Errorf("the user stack is not a view of Raw")
	}
	// Registers by perf number: SP (7) is the 8th of the mask's, R8 (16)
	// the 10th, after IP (8); FLAGS (9) is not in the mask.
	if v, ok := got.RegsUser.Get(7); !ok || v != 0x1007 {
		t.Errorf("SP %#x %v", v, ok)
	}
	if v, ok := got.RegsUser.Get(16); !ok || v != 0x1009 {
		t.Errorf("R8 %#x %v", v, ok)
	}
	if _, ok := got.RegsUser.Get(9); ok {
		t.Errorf("FLAGS found, not in the mask")
	}
	// A kernel thread's sample has no user registers and no stack.
	e := &enc{}
	e.u64(0xffffffff81000000).u32s(0, 5).u64(1).u32s(0, 0).u64(1).u64(0).u64(perfdata.RegsABINone).u64(0)
	dr, err = rec(perfdata.RecordSample, perfdata.MiscKernel, e.b, d).Decode()
	if err != nil || dr.Sample().RegsUser.Len() != 0 || dr.Sample().StackUser != nil || dr.Sample().StackUserSize != 0 {
		t.Errorf("kernel thread sample: %+v, %v", dr.Sample(), err)
	}
	// Several events: the identifier comes first, and names the event.
	attrs := buildAttrs(t, Options{PIDs: []int{1}, Events: []Event{CPUClock, ContextSwitches}, RegsUser: RegsAMD64, StackUser: 64, Callchain: true})
	attrs[0].IDs, attrs[1].IDs = []uint64{76}, []uint64{77}
	a2 := attrs[1]
	want2 := testSample(a2)
	want2.Identifier = 77
	dr, err = rec(perfdata.RecordSample, perfdata.MiscUser, sampleBody(a2, want2), decoderOf(attrs...)).Decode()
	if err != nil || dr.Attr != a2.Attr {
		t.Fatalf("with identifier: event %p, want %p; %v", dr.Attr, a2.Attr, err)
	}
	checkSample(t, dr.Sample(), a2, want2)
}

func TestDecodeSampleTruncated(t *testing.T) {
	a := testAttr(t, Options{})
	d := decoderOf(a)
	body := sampleBody(a, testSample(a))
	for n := range len(body) {
		if _, err := rec(perfdata.RecordSample, 0, body[:n], d).Decode(); perfdata.KindOf(err) != perfdata.ErrBadRecord {
			t.Fatalf("body cut to %d of %d bytes: %v, want a record error", n, len(body), err)
		}
	}
	// dyn_size larger than the stack copy.
	bad := bytes.Clone(body)
	ne.PutUint64(bad[len(bad)-8:], 65)
	if _, err := rec(perfdata.RecordSample, 0, bad, d).Decode(); err == nil {
		t.Error("dyn_size past the stack: no error")
	}
	// A sample of no known event, and a record of another type, have no
	// sample fields.
	if dr, err := rec(perfdata.RecordSample, 0, body, decoderOf()).Decode(); err != nil || dr.Sample() != nil {
		t.Errorf("sample without attribute: decoded, %v", err)
	}
	if dr, err := rec(perfdata.RecordMmap2, 0, body, d).Decode(); err != nil || dr.Sample() != nil {
		t.Errorf("MMAP2 decoded as a sample, %v", err)
	}
	if _, err := (&Record{Raw: body}).Decode(); err == nil {
		t.Error("record of no session: no error")
	}
}

func TestDecodeOtherRecords(t *testing.T) {
	// With sample_id_all, TID, TIME and CPU trail every record.
	a := testAttr(t, Options{SampleIDAll: true})
	d := decoderOf(a)
	trailer := (&enc{}).u32s(7, 8).u64(999).u32s(1, 0).b
	name := []byte("/usr/lib/libc.so.6\x00\x00\x00\x00\x00\x00")
	body := (&enc{}).u32s(7, 8).u64(0x7f0000).u64(0x2000).u64(0x1000).u32s(254, 1).u64(42).u64(3).u32s(5, 2).bytes(name).bytes(trailer).b
	dr, err := rec(perfdata.RecordMmap2, perfdata.MiscUser, body, d).Decode()
	if err != nil {
		t.Fatal(err)
	}
	wantM := perfdata.Mmap{Pid: 7, Tid: 8, Addr: 0x7f0000, Len: 0x2000, Pgoff: 0x1000, Maj: 254, Min: 1, Ino: 42, InoGen: 3,
		Prot: 5, Flags: 2, Filename: []byte("/usr/lib/libc.so.6"), IsMmap2: true, Executable: true, FilenameBytes: len(name)}
	if !reflect.DeepEqual(*dr.Mmap(), wantM) {
		t.Errorf("MMAP2 %+v\nwant %+v", *dr.Mmap(), wantM)
	}
	if dr.ID != (perfdata.Identity{Present: perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleCPU, Pid: 7, Tid: 8, Time: 999, CPU: 1}) {
		t.Errorf("identity %+v", dr.ID)
	}
	// The build-ID form.
	bid := (&enc{}).bytes([]byte{4, 0, 0, 0, 1, 2, 3, 4}).bytes(make([]byte, 16)).b
	body = (&enc{}).u32s(7, 8).u64(0x7f0000).u64(0x2000).u64(0).bytes(bid).u32s(5, 2).bytes(name).bytes(trailer).b
	if dr, err := rec(perfdata.RecordMmap2, perfdata.MiscUser|perfdata.MiscMmapBuildID, body, d).Decode(); err != nil || !dr.Mmap().HasBuildID || !bytes.Equal(dr.Mmap().BuildID, []byte{1, 2, 3, 4}) {
		t.Errorf("MMAP2 with build ID: %+v, %v", dr, err)
	}

	body = (&enc{}).u32s(7, 7).bytes([]byte("spinprog\x00\x00\x00\x00\x00\x00\x00\x00")).bytes(trailer).b
	if dr, err := rec(perfdata.RecordComm, perfdata.MiscCommExec, body, d).Decode(); err != nil || string(dr.Comm().Comm) != "spinprog" || !dr.Comm().Exec || dr.Comm().Pid != 7 {
		t.Errorf("COMM %+v, %v", dr, err)
	}
	body = (&enc{}).u32s(7, 1).u32s(9, 7).u64(555).bytes(trailer).b
	if dr, err := rec(perfdata.RecordFork, 0, body, d).Decode(); err != nil || *dr.Task() != (perfdata.Task{Pid: 7, Ppid: 1, Tid: 9, Ptid: 7, Time: 555}) {
		t.Errorf("FORK %+v, %v", dr, err)
	}
	body = (&enc{}).u64(31).u64(12).bytes(trailer).b
	if dr, err := rec(perfdata.RecordLost, 0, body, d).Decode(); err != nil || *dr.Lost() != (perfdata.Lost{ID: 31, Lost: 12}) {
		t.Errorf("LOST %+v, %v", dr, err)
	}
	if dr, err := rec(perfdata.RecordSwitch, perfdata.MiscSwitchOut|perfdata.MiscSwitchOutPreempt, trailer, d).Decode(); err != nil || *dr.Switch() != (perfdata.Switch{Out: true, Preempt: true}) {
		t.Errorf("SWITCH %+v, %v", dr, err)
	}
	body = (&enc{}).u32s(3, 4).bytes(trailer).b
	if dr, err := rec(perfdata.RecordSwitchCPUWide, 0, body, d).Decode(); err != nil || *dr.Switch() != (perfdata.Switch{NextPrevPid: 3, NextPrevTid: 4}) {
		t.Errorf("SWITCH_CPU_WIDE %+v, %v", dr, err)
	}
	// Records shorter than their fields and trailer.
	for _, typ := range []perfdata.RecordType{perfdata.RecordMmap, perfdata.RecordMmap2, perfdata.RecordComm, perfdata.RecordFork,
		perfdata.RecordExit, perfdata.RecordLost, perfdata.RecordLostSamples, perfdata.RecordSwitchCPUWide} {
		for n := range len(trailer) + 8 {
			if _, err := rec(typ, 0, make([]byte, n), d).Decode(); err == nil {
				t.Errorf("%s of %d bytes: no error", typ, n)
			}
		}
	}
}

// FuzzDecode decodes arbitrary record bodies of a profiler's events,
// with and without sample_id_all and the identifier: errors, never
// panics.
func FuzzDecode(f *testing.F) {
	a := testAttr(f, Options{})
	f.Add(uint8(perfdata.RecordSample), uint16(0), uint8(0), sampleBody(a, testSample(a)))
	f.Add(uint8(perfdata.RecordMmap2), uint16(perfdata.MiscMmapBuildID), uint8(1), make([]byte, 100))
	f.Add(uint8(perfdata.RecordComm), uint16(0), uint8(2), []byte("1234\x00"))
	two := buildAttrs(f, Options{PIDs: []int{1}, Events: []Event{CPUClock, TaskClock}, SampleIDAll: true, RegsUser: RegsARM64, StackUser: 8, UserCallchain: true})
	two[0].IDs, two[1].IDs = []uint64{1, 2}, []uint64{3, 4}
	decoders := []*perfdata.Decoder{
		decoderOf(a),
		decoderOf(testAttr(f, Options{SampleIDAll: true})),
		decoderOf(two...),
	}
	f.Fuzz(func(t *testing.T, typ uint8, misc uint16, which uint8, body []byte) {
		if len(body) > maxRecordSize-headerSize {
			return
		}
		r := rec(perfdata.RecordType(typ%24), perfdata.Misc(misc), body, decoders[int(which)%len(decoders)])
		if dr, err := r.Decode(); err == nil {
			if s := dr.Sample(); s != nil {
				for i := range s.Callchain.Len() {
					s.Callchain.At(i)
				}
				s.RegsUser.Get(7)
			}
		} else if perfdata.KindOf(err) == 0 {
			t.Fatalf("%v is not a *perfdata.Error", err)
		}
	})
}
